// layer_norm, fused: one kernel computes y and saves each row's mean and rstd = 1/sqrt(var + eps),
// so the backward needs no second pass over statistics. Ba, Kiros & Hinton (2016); the formulas are
// torch.nn.functional.layer_norm's: biased variance, eps inside the square root.
// rms_norm, fused the same way: layer norm without the mean and without the bias (Zhang & Sennrich 2019), one
// saved statistic per row, rstd = 1/sqrt(mean(x^2) + eps), as torch.nn.functional.rms_norm.
// add_rms_norm: rms_norm(x + residual) and the sum, in the norm's one pass (llm.c's fused residual forward); its
// graph is the two ops' (an add node, then rms_norm's), so its gradients are theirs.
#include "common.h"

namespace stepformer {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  detail::check_operands("layer_norm", {&x});
  detail::check_full_precision("layer_norm", x);
  if (x.dim() == 0) throw ShapeError("layer_norm: the input needs at least 1 dim, got a 0-dim tensor");
  if (!(eps > 0)) throw ValueError(fmt::format("layer_norm: eps must be positive, got {}", eps));
  const std::int64_t D = x.size(-1);
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    detail::check_operands("layer_norm", {&x, p});
    if (p->shape() != Shape{D})
      throw ShapeError(fmt::format("layer_norm: weight and bias must have shape [{}] for an input of shape {}, got {}",
                                   D, to_string(x.shape()), to_string(p->shape())));
  }
  const Tensor xc = contiguous(x);
  const Tensor w = weight.defined() ? contiguous(weight) : Tensor();
  const Tensor b = bias.defined() ? contiguous(bias) : Tensor();
  const Shape rows(x.shape().begin(), x.shape().end() - 1);
  Tensor y = detail::empty_as(xc, xc.shape());
  Tensor mean = detail::empty_as(xc, rows), rstd = detail::empty_as(xc, rows);
  const TensorDesc none{};
  xc.backend().layer_norm_forward(y.desc(), mean.desc(), rstd.desc(), xc.desc(), w.defined() ? w.desc() : none,
                                  b.defined() ? b.desc() : none, eps);

  // One backward kernel yields all three gradients.
  record(Op::layer_norm, y, {xc, w, b}, {xc, w, mean, rstd},
         [has_bias = b.defined()](const Tensor& g, const Tensor& sx, const Tensor& sw, const Tensor& mean,
                                  const Tensor& rstd) -> Gradients {
           const Tensor gc = contiguous(g);
           const Shape d{gc.size(-1)};
           Tensor dx = detail::empty_as(gc, gc.shape());                   // [..., D]
           Tensor dw = sw.defined() ? detail::empty_as(gc, d) : Tensor();  // [D]
           Tensor db = has_bias ? detail::empty_as(gc, d) : Tensor();      // [D]
           const TensorDesc none{};
           gc.backend().layer_norm_backward(dx.desc(), dw.defined() ? dw.desc() : none, db.defined() ? db.desc() : none,
                                            gc.desc(), sx.desc(), mean.desc(), rstd.desc(),
                                            sw.defined() ? sw.desc() : none);
           return {dx, dw, db};
         });
  return y;
}

namespace {
void check_rms_norm(const char* op, const Tensor& x, const Tensor& weight, double eps) {
  detail::check_operands(op, {&x});
  detail::check_full_precision(op, x);
  if (x.dim() == 0) throw ShapeError(fmt::format("{}: the input needs at least 1 dim, got a 0-dim tensor", op));
  if (!(eps > 0)) throw ValueError(fmt::format("{}: eps must be positive, got {}", op, eps));
  const std::int64_t D = x.size(-1);
  if (weight.defined()) {
    detail::check_operands(op, {&x, &weight});
    if (weight.shape() != Shape{D})
      throw ShapeError(fmt::format("{}: weight must have shape [{}] for an input of shape {}, got {}", op, D,
                                   to_string(x.shape()), to_string(weight.shape())));
  }
}

// rms_norm's kernel and record for the rows of contiguous x or, with a residual, of x + residual, whose sum the
// kernel writes into `sum`.
Tensor rms_norm_rows(const Tensor& x, const Tensor& weight, double eps, Tensor sum = {}, const Tensor& residual = {}) {
  const Tensor w = weight.defined() ? contiguous(weight) : Tensor();
  const Shape rows(x.shape().begin(), x.shape().end() - 1);
  Tensor y = detail::empty_as(x, x.shape());
  Tensor rstd = detail::empty_as(x, rows);
  const TensorDesc none{};
  const Tensor& normalised = residual.defined() ? sum : x;
  x.backend().rms_norm_forward(y.desc(), rstd.desc(), residual.defined() ? sum.desc() : none, x.desc(),
                               residual.defined() ? residual.desc() : none, w.defined() ? w.desc() : none, eps);
  // The sum is add's node, recorded first (the norm's node takes it as its input): the gradient that reaches it goes
  // to both terms as it is.
  if (residual.defined()) record(Op::add, sum, {x, residual}, [](const Tensor& g) { return Gradients{g, g}; });

  // One backward kernel yields both gradients.
  record(Op::rms_norm, y, {normalised, w}, {normalised, w, rstd},
         [](const Tensor& g, const Tensor& sx, const Tensor& sw, const Tensor& rstd) -> Gradients {
           const Tensor gc = contiguous(g);
           Tensor dx = detail::empty_as(gc, gc.shape());                                    // [..., D]
           Tensor dw = sw.defined() ? detail::empty_as(gc, Shape{gc.size(-1)}) : Tensor();  // [D]
           const TensorDesc none{};
           gc.backend().rms_norm_backward(dx.desc(), dw.defined() ? dw.desc() : none, gc.desc(), sx.desc(), rstd.desc(),
                                          sw.defined() ? sw.desc() : none);
           return {dx, dw};
         });
  return y;
}
}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  check_rms_norm("rms_norm", x, weight, eps);
  return rms_norm_rows(contiguous(x), weight, eps);
}

SumAndNorm add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps) {
  check_rms_norm("add_rms_norm", x, weight, eps);
  detail::check_operands("add_rms_norm", {&x, &residual});
  if (x.shape() != residual.shape())
    throw ShapeError(fmt::format("add_rms_norm: x {} and residual {} must have the same shape (no broadcasting)",
                                 to_string(x.shape()), to_string(residual.shape())));
  const Tensor xc = contiguous(x), rc = contiguous(residual);
  Tensor sum = detail::empty_as(xc, xc.shape());
  Tensor normed = rms_norm_rows(xc, weight, eps, sum, rc);
  return {sum, normed};
}

}  // namespace stepformer
