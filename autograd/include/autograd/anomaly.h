#pragma once
// Anomaly mode, as torch.autograd.set_detect_anomaly: while it is on, every op that records a graph node
// checks its output, and backward checks every gradient it computes, for NaN and infinity. The first op
// where one appears although its inputs had none throws AnomalyError naming the op, its inputs' shapes
// and the module it ran in. `where` may produce -inf (that is how attention masks work): for it only NaN
// counts. It costs a pass over every tensor: a debugging switch, off by default.
#include "autograd/errors.h"

namespace stepformer {

void set_detect_anomaly(bool on);
bool detect_anomaly();

class DetectAnomalyGuard {  // on for its lifetime, then back to what it was
 public:
  DetectAnomalyGuard() : previous_(detect_anomaly()) { set_detect_anomaly(true); }
  ~DetectAnomalyGuard() { set_detect_anomaly(previous_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace stepformer
