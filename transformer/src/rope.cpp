// Chapter 12. Shape legend in transformer/config.h.
#include "transformer/rope.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "autograd/errors.h"
#include "autograd/ops.h"

namespace stepformer::transformer {

RopePairing rope_pairing_from_name(const std::string& name) {
  if (name == "half") return RopePairing::half;
  if (name == "adjacent") return RopePairing::adjacent;
  throw ValueError(fmt::format("rope pairing: expected half or adjacent, got '{}'", name));
}

namespace {
// The angles (start + t) theta_i of every position t and pair i, as cos and sin tables [T, Dh/2] (float64).
void angle_tables(std::int64_t T, std::int64_t Dh, std::int64_t start, double base, std::vector<double>& cos_t,
                  std::vector<double>& sin_t) {
  const std::int64_t pairs = Dh / 2;
  cos_t.resize(T * pairs);
  sin_t.resize(T * pairs);
  // EXERCISE 12.2: position start + t, pair i: angle (start + t) * base^(-2i / Dh); its cos and sin.
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < pairs; ++i) {
      const double theta = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(Dh));
      const double angle = static_cast<double>(start + t) * theta;
      cos_t[t * pairs + i] = std::cos(angle);
      sin_t[t * pairs + i] = std::sin(angle);
    }
  // END EXERCISE
}
}  // namespace

Tensor rope(const Tensor& x, std::int64_t start, RopePairing pairing, double base) {
  if (x.dim() != 4 || x.size(3) % 2 != 0)
    throw ShapeError(fmt::format("rope expected [B, H, T, Dh] with Dh even, got {}", to_string(x.shape())));
  if (start < 0 || !(base > 1)) throw ValueError(fmt::format("rope: start {} must be >= 0, base {} > 1", start, base));
  const std::int64_t B = x.size(0), H = x.size(1), T = x.size(2), Dh = x.size(3), pairs = Dh / 2;
  std::vector<double> c, s;
  angle_tables(T, Dh, start, base, c, s);
  const Options o{x.dtype(), x.device()};
  // Each pair (a, b) becomes (a cos - b sin, b cos + a sin): a rotation in the pair's plane.
  if (pairing == RopePairing::half) {
    const Tensor cos_t = from_vector(c, {T, pairs}, o), sin_t = from_vector(s, {T, pairs}, o);
    const Tensor a = narrow(x, 3, 0, pairs), b = narrow(x, 3, pairs, pairs);  // [B, H, T, Dh/2] each
    return cat({a * cos_t - b * sin_t, b * cos_t + a * sin_t}, 3);
  }
  const Tensor cos_t = from_vector(c, {T, pairs, 1}, o), sin_t = from_vector(s, {T, pairs, 1}, o);
  const Tensor xp = reshape(x, {B, H, T, pairs, 2});
  const Tensor a = narrow(xp, 4, 0, 1), b = narrow(xp, 4, 1, 1);  // [B, H, T, Dh/2, 1] each
  return reshape(cat({a * cos_t - b * sin_t, b * cos_t + a * sin_t}, 4), {B, H, T, Dh});
}

}  // namespace stepformer::transformer
