#include "autograd/gradcheck.h"

#include <fmt/format.h>

#include <cmath>

#include "autograd/errors.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace stepformer {

namespace {
Shape unravel(std::int64_t flat, const Shape& shape) {
  Shape index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}
}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                          GradcheckOptions opt) {
  for (const Tensor& x : inputs)
    if (x.requires_grad() && x.dtype() != DType::float64)
      throw DTypeError(
          fmt::format("gradcheck: inputs that require grad must be float64 (finite differences in "
                      "float32 are too coarse), got {} {}",
                      dtype_name(x.dtype()), to_string(x.shape())));

  // L = sum(f(x) * w): a fixed random w makes every output element count with its own weight.
  const Tensor y0 = f(inputs);
  Generator gen(12345);
  const Tensor w = uniform(y0.shape(), 0.5, 1.5, gen, {y0.dtype(), y0.device(), false});
  auto loss = [&](const std::vector<Tensor>& xs) { return sum(mul(f(xs), w)); };

  std::vector<Tensor> leaves = inputs;
  for (Tensor& x : leaves) x.zero_grad();
  loss(leaves).backward();

  GradcheckResult result;
  double worst = 0.0;
  NoGradGuard no_grad;
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    Tensor& x = leaves[k];
    if (!x.requires_grad()) continue;
    const Tensor analytic = x.grad();
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const Shape index = unravel(i, x.shape());
      const double original = x.at(index);
      x.set(index, original + opt.eps);
      const double plus = loss(leaves).item();
      x.set(index, original - opt.eps);
      const double minus = loss(leaves).item();
      x.set(index, original);
      const double numeric = (plus - minus) / (2 * opt.eps);
      const double a = analytic.defined() ? analytic.at(index) : 0.0;
      const double excess = std::abs(a - numeric) - (opt.atol + opt.rtol * std::abs(numeric));
      if (excess > worst || (std::isnan(a) != std::isnan(numeric))) {
        worst = std::isnan(excess) ? INFINITY : excess;
        result.ok = false;
        result.report = fmt::format(
            "gradcheck: input {} {} element {}: analytic {:.10g}, numeric {:.10g} "
            "(|diff| {:.3g} > atol {:.1g} + rtol {:.1g} * |numeric|)",
            k, to_string(x.shape()), to_string(index), a, numeric, std::abs(a - numeric), opt.atol, opt.rtol);
      }
    }
  }
  for (Tensor& x : leaves) x.zero_grad();
  return result;
}

}  // namespace stepformer
