// The vectorisable float exp of the CPU kernels (autograd/backends/cpu/vmath.h) against libm.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "../helpers.h"
#include "vmath.h"

namespace {
// Distance in units in the last place between two finite floats of the same sign.
std::int64_t ulps(float a, float b) {
  return std::abs(static_cast<std::int64_t>(std::bit_cast<std::int32_t>(a)) - std::bit_cast<std::int32_t>(b));
}
}  // namespace

TEST_CASE("exp_approx is within 2 ulp of std::exp over the whole float range", "[vmath]") {
  std::int64_t worst = 0;
  float worst_x = 0;
  for (float x = -87.3f; x < 88.7f; x += 1.0e-4f * (1 + std::abs(x))) {
    const std::int64_t d = ulps(stepformer::cpu::exp_approx(x), std::exp(x));
    if (d > worst) worst = d, worst_x = x;
  }
  INFO("worst at x = " << worst_x);
  CHECK(worst <= 2);
  CHECK(stepformer::cpu::exp_approx(0.f) == 1.f);
}

TEST_CASE("exp_approx: infinities, underflow, overflow and NaN", "[vmath]") {
  using stepformer::cpu::exp_approx;
  constexpr float inf = std::numeric_limits<float>::infinity();
  CHECK(exp_approx(-inf) == 0.f);  // a masked attention score must weigh exactly 0
  CHECK(exp_approx(-100.f) == 0.f);
  CHECK(exp_approx(inf) == inf);
  CHECK(exp_approx(100.f) == inf);
  CHECK(std::isnan(exp_approx(std::numeric_limits<float>::quiet_NaN())));
}
