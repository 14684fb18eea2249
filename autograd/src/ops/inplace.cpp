// In-place writes. They are not differentiable: they serve optimizers and initialisation, under
// NoGradGuard. Each bumps the storage's version so a backward that saved the tensor notices.
#include "common.h"

namespace stepformer {

namespace {
void check_writable(const char* op, const Tensor& t) {
  if (!t.defined()) throw Error(fmt::format("{}: the tensor is undefined", op));
  if (grad_enabled() && t.requires_grad())
    throw AutogradError(
        fmt::format("{}: an in-place write to a tensor that requires grad ({}{}) would corrupt "
                    "its gradient; do it under NoGradGuard",
                    op, t.is_leaf() ? "a leaf of shape " : "shape ", to_string(t.shape())));
  for (std::size_t i = 0; i < t.shape().size(); ++i)
    if (t.strides()[i] == 0 && t.shape()[i] > 1)
      throw ValueError(
          fmt::format("{}: cannot write in place to an expanded tensor (shape {}, strides {}): "
                      "several elements share one memory location",
                      op, to_string(t.shape()), to_string(t.strides())));
}
}  // namespace

Tensor& fill_(Tensor& a, double value) {
  check_writable("fill_", a);
  a.backend().fill(a.desc(), value);
  a.bump_version();
  return a;
}

Tensor& zero_(Tensor& a) { return fill_(a, 0.0); }

Tensor& copy_(Tensor& dst, const Tensor& src) {
  check_writable("copy_", dst);
  detail::check_operands("copy_", {&dst, &src}, /*same_dtype=*/false);
  if (broadcast_shapes("copy_", dst.shape(), src.shape()) != dst.shape())
    throw ShapeError(fmt::format("copy_: source of shape {} does not broadcast to the destination's shape {}",
                                 to_string(src.shape()), to_string(dst.shape())));
  dst.backend().unary(UnaryOp::copy, dst.desc(), detail::broadcast_desc(src, dst.shape()), 0.0);
  dst.bump_version();
  return dst;
}

Tensor& add_(Tensor& a, const Tensor& b, double alpha) {
  check_writable("add_", a);
  detail::check_operands("add_", {&a, &b});
  if (broadcast_shapes("add_", a.shape(), b.shape()) != a.shape())
    throw ShapeError(
        fmt::format("add_: operand of shape {} does not broadcast to {}", to_string(b.shape()), to_string(a.shape())));
  if (a.dtype() == DType::bfloat16) {  // in float32, rounded once (dtype.h)
    const Tensor sum = detail::widen(a);
    sum.backend().accumulate(sum.desc(), detail::broadcast_desc(detail::widen(b), a.shape()), alpha);
    a.backend().unary(UnaryOp::copy, a.desc(), sum.desc(), 0.0);
  } else {
    a.backend().accumulate(a.desc(), detail::broadcast_desc(b, a.shape()), alpha);
  }
  a.bump_version();
  return a;
}

void adam_update_(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamConfig& cfg) {
  for (Tensor* t : {&param, &m, &v}) check_writable("adam_update_", *t);
  detail::check_operands("adam_update_", {&param, &grad, &m, &v});
  detail::check_full_precision("adam_update_", param);
  for (const Tensor* t : {&grad, static_cast<const Tensor*>(&m), static_cast<const Tensor*>(&v)})
    if (t->shape() != param.shape())
      throw ShapeError(fmt::format("adam_update_: param {} and state {} differ in shape", to_string(param.shape()),
                                   to_string(t->shape())));
  for (const Tensor* t :
       {static_cast<const Tensor*>(&param), &grad, static_cast<const Tensor*>(&m), static_cast<const Tensor*>(&v)})
    if (!t->is_contiguous()) throw ValueError("adam_update_: param, grad and state must be contiguous");
  if (cfg.step < 1) throw ValueError(fmt::format("adam_update_: step is 1-based, got {}", cfg.step));
  param.backend().adam_update(param.desc(), grad.desc(), m.desc(), v.desc(), cfg);
  for (Tensor* t : {&param, &m, &v}) t->bump_version();
}

}  // namespace stepformer
