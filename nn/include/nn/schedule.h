#pragma once
// Learning-rate schedules: the learning rate as a function of the 1-based step. Call
// optimizer.set_lr(schedule(step)) before optimizer.step(). A step below 1 is treated as 1.
#include <cstdint>

namespace stepformer::nn {

// "Attention Is All You Need", section 5.3: lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5),
// times an optional factor (the annotated Transformer's). Rises linearly for `warmup` steps, then decays
// as 1/sqrt(step); the peak, at step = warmup, is factor / sqrt(d_model * warmup).
struct NoamSchedule {
  std::int64_t d_model;
  std::int64_t warmup = 4000;
  double factor = 1.0;
  double operator()(std::int64_t step) const;
};

// Linear warmup from 0 to peak over `warmup` steps, then linear decay to 0 at `total`.
struct LinearWarmup {
  double peak;
  std::int64_t warmup, total;
  double operator()(std::int64_t step) const;
};

// Linear warmup to peak, then half a cosine from peak down to `floor` at `total` (Loshchilov & Hutter 2017).
struct CosineWarmup {
  double peak;
  std::int64_t warmup, total;
  double floor = 0.0;
  double operator()(std::int64_t step) const;
};

}  // namespace stepformer::nn
