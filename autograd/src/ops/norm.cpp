// layer_norm, fused: one kernel computes y and saves each row's mean and rstd = 1/sqrt(var + eps),
// so the backward needs no second pass over statistics. Ba, Kiros & Hinton (2016); the formulas are
// torch.nn.functional.layer_norm's: biased variance, eps inside the square root.
// rms_norm, fused the same way: layer norm without the mean and without the bias (Zhang & Sennrich 2019), one
// saved statistic per row, rstd = 1/sqrt(mean(x^2) + eps), as torch.nn.functional.rms_norm.
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

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  detail::check_operands("rms_norm", {&x});
  detail::check_full_precision("rms_norm", x);
  if (x.dim() == 0) throw ShapeError("rms_norm: the input needs at least 1 dim, got a 0-dim tensor");
  if (!(eps > 0)) throw ValueError(fmt::format("rms_norm: eps must be positive, got {}", eps));
  const std::int64_t D = x.size(-1);
  if (weight.defined()) {
    detail::check_operands("rms_norm", {&x, &weight});
    if (weight.shape() != Shape{D})
      throw ShapeError(fmt::format("rms_norm: weight must have shape [{}] for an input of shape {}, got {}", D,
                                   to_string(x.shape()), to_string(weight.shape())));
  }
  const Tensor xc = contiguous(x);
  const Tensor w = weight.defined() ? contiguous(weight) : Tensor();
  const Shape rows(x.shape().begin(), x.shape().end() - 1);
  Tensor y = detail::empty_as(xc, xc.shape());
  Tensor rstd = detail::empty_as(xc, rows);
  const TensorDesc none{};
  xc.backend().rms_norm_forward(y.desc(), rstd.desc(), xc.desc(), w.defined() ? w.desc() : none, eps);

  // One backward kernel yields both gradients.
  record(Op::rms_norm, y, {xc, w}, {xc, w, rstd},
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

}  // namespace stepformer
