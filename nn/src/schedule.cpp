#include "nn/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace stepformer::nn {

double NoamSchedule::operator()(std::int64_t step) const {
  // EXERCISE 7.3: lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (paper 5.3).
  const double s = static_cast<double>(std::max<std::int64_t>(step, 1));
  const double w = static_cast<double>(warmup);
  return factor * std::pow(static_cast<double>(d_model), -0.5) * std::min(std::pow(s, -0.5), s * std::pow(w, -1.5));
  // END EXERCISE
}

double LinearWarmup::operator()(std::int64_t step) const {
  const std::int64_t s = std::max<std::int64_t>(step, 1);
  if (s < warmup) return peak * static_cast<double>(s) / static_cast<double>(warmup);
  if (s >= total) return 0.0;
  return peak * static_cast<double>(total - s) / static_cast<double>(std::max<std::int64_t>(total - warmup, 1));
}

double CosineWarmup::operator()(std::int64_t step) const {
  const std::int64_t s = std::max<std::int64_t>(step, 1);
  if (s < warmup) return peak * static_cast<double>(s) / static_cast<double>(warmup);
  if (s >= total) return floor;
  const double progress =
      static_cast<double>(s - warmup) / static_cast<double>(std::max<std::int64_t>(total - warmup, 1));
  return floor + (peak - floor) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace stepformer::nn
