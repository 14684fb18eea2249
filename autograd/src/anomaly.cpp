#include "autograd/anomaly.h"

#include <atomic>

namespace stepformer {

namespace {
std::atomic<bool> anomaly{false};
}  // namespace

void set_detect_anomaly(bool on) { anomaly = on; }
bool detect_anomaly() { return anomaly; }

}  // namespace stepformer
