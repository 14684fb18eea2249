#include "nn/init.h"

#include <fmt/format.h>

#include <cmath>

#include "autograd/errors.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace stepformer::nn::init {

namespace {
std::int64_t receptive_field(const Tensor& w) {
  if (w.dim() < 2)
    throw ShapeError(fmt::format("init: fan in and fan out need at least 2 dims, got {}", to_string(w.shape())));
  std::int64_t r = 1;
  for (std::int64_t d = 2; d < w.dim(); ++d) r *= w.size(d);
  return r;
}

void assign(Tensor& t, const Tensor& values) {
  NoGradGuard no_grad;
  copy_(t, values);
}

double leaky_relu_gain(double a) { return std::sqrt(2.0 / (1.0 + a * a)); }
}  // namespace

std::int64_t fan_in(const Tensor& w) {
  const std::int64_t r = receptive_field(w);  // first: it checks that w has 2 dims
  return w.size(1) * r;
}
std::int64_t fan_out(const Tensor& w) {
  const std::int64_t r = receptive_field(w);
  return w.size(0) * r;
}

void uniform_(Tensor& t, double low, double high, Generator& gen) {
  assign(t, uniform(t.shape(), low, high, gen, {t.dtype(), t.device()}));
}
void normal_(Tensor& t, double mean, double std, Generator& gen) {
  assign(t, normal(t.shape(), mean, std, gen, {t.dtype(), t.device()}));
}
void zeros_(Tensor& t) { assign(t, scalar(0.0, {t.dtype(), t.device()})); }
void ones_(Tensor& t) { assign(t, scalar(1.0, {t.dtype(), t.device()})); }

void xavier_uniform_(Tensor& t, double gain, Generator& gen) {
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in(t) + fan_out(t)));
  uniform_(t, -bound, bound, gen);
}
void xavier_normal_(Tensor& t, double gain, Generator& gen) {
  normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in(t) + fan_out(t))), gen);
}
void kaiming_uniform_(Tensor& t, double a, Generator& gen) {
  const double bound = leaky_relu_gain(a) * std::sqrt(3.0 / static_cast<double>(fan_in(t)));
  uniform_(t, -bound, bound, gen);
}
void kaiming_normal_(Tensor& t, double a, Generator& gen) {
  normal_(t, 0.0, leaky_relu_gain(a) / std::sqrt(static_cast<double>(fan_in(t))), gen);
}

}  // namespace stepformer::nn::init
