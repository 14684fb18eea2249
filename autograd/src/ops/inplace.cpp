// In-place writes. They are not differentiable: they serve optimizers and initialisation, under
// NoGradGuard. Each bumps the storage's version so a backward that saved the tensor notices.
#include <algorithm>

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
  detail::check_number_fits("fill_", value, a.dtype(), a.shape());
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

Tensor& mul_(Tensor& a, const Tensor& b) {
  check_writable("mul_", a);
  detail::check_operands("mul_", {&a, &b});
  if (broadcast_shapes("mul_", a.shape(), b.shape()) != a.shape())
    throw ShapeError(
        fmt::format("mul_: operand of shape {} does not broadcast to {}", to_string(b.shape()), to_string(a.shape())));
  a.backend().binary(BinaryOp::mul, a.desc(), a.desc(), detail::broadcast_desc(b, a.shape()));
  a.bump_version();
  return a;
}

Tensor& index_copy_(Tensor& dst, std::int64_t dim, const Tensor& index, const Tensor& source) {
  check_writable("index_copy_", dst);
  detail::check_operands("index_copy_", {&dst, &index, &source}, /*same_dtype=*/false);
  detail::check_dtype("index_copy_", index, DType::int64, "index");
  if (source.dtype() != dst.dtype())
    throw DTypeError(fmt::format("index_copy_: source is {} where the destination is {}", dtype_name(source.dtype()),
                                 dtype_name(dst.dtype())));
  const auto d = static_cast<std::size_t>(wrap_dim("index_copy_", dim, dst.dim()));
  Shape expected = dst.shape();
  if (index.dim() > 1 || (expected[d] = index.numel(), source.shape() != expected))
    throw ShapeError(fmt::format("index_copy_: index {} and source {} do not fit dim {} of {}: source must be {}",
                                 to_string(index.shape()), to_string(source.shape()), dim, to_string(dst.shape()),
                                 to_string(expected)));
  const Shape& shape = dst.shape();
  const auto at_dim = shape.begin() + static_cast<std::ptrdiff_t>(d);
  const std::int64_t P = numel(Shape(shape.begin(), at_dim)), N = shape[d], E = numel(Shape(at_dim + 1, shape.end())),
                     n = index.numel();
  const auto describe = [dim, n, N](std::int64_t position, std::int64_t value) {
    return fmt::format(
        "index_copy_: index {} at position {} of {} is out of range for dim {} of size {} (valid: 0 to {})", value,
        position, n, dim, N, N - 1);
  };
  // Backends write [P, N, E] rows of contiguous memory: a strided destination is written through a copy of it.
  Tensor table = dst.is_contiguous() ? dst : contiguous(dst);
  const Tensor rows = contiguous(source), ids = contiguous(reshape(index, {n}));
  const std::int64_t bad =
      dst.backend().write_rows(view(table, {P, N, E}).desc(), view(rows, {P, n, E}).desc(), ids.desc(), describe);
  if (bad >= 0) throw IndexError(describe(bad, static_cast<std::int64_t>(ids.at({bad}))));
  if (!dst.is_same(table)) dst.backend().unary(UnaryOp::copy, dst.desc(), table.desc(), 0.0);
  dst.bump_version();
  return dst;
}

void mul_(std::vector<Tensor>& tensors, const Tensor& factor) {
  if (factor.numel() != 1)
    throw ShapeError(
        fmt::format("mul_: the factor of many tensors must be one value, got {}", to_string(factor.shape())));
  for (Tensor& t : tensors) {
    check_writable("mul_", t);
    detail::check_operands("mul_", {&t, &factor});
  }
  if (tensors.empty()) return;
  std::vector<TensorDesc> descs;
  for (const Tensor& t : tensors) descs.push_back(t.desc());
  const bool contiguous =
      std::all_of(tensors.begin(), tensors.end(), [](const Tensor& t) { return t.is_contiguous(); });
  if (contiguous && factor.backend().scale_many(descs, factor.desc()))
    for (Tensor& t : tensors) t.bump_version();
  else
    for (Tensor& t : tensors) mul_(t, factor);  // bumps each version
}

namespace {
// adam_update_'s checks of one parameter's tensors.
void check_adam(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamConfig& cfg) {
  for (const Tensor* t : {&param, &m, &v}) check_writable("adam_update_", *t);
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
}
}  // namespace

void adam_update_(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamConfig& cfg) {
  check_adam(param, grad, m, v, cfg);
  param.backend().adam_update(param.desc(), grad.desc(), m.desc(), v.desc(), cfg);
  for (Tensor* t : {&param, &m, &v}) t->bump_version();
}

void adam_update_(std::vector<Tensor>& params, const std::vector<Tensor>& grads, std::vector<Tensor>& ms,
                  std::vector<Tensor>& vs, const AdamConfig& host_cfg, const Tensor& step_values) {
  const std::size_t n = params.size();
  if (grads.size() != n || ms.size() != n || vs.size() != n)
    throw ValueError(fmt::format("adam_update_: {} params, {} grads, {} first and {} second moments", n, grads.size(),
                                 ms.size(), vs.size()));
  for (std::size_t i = 0; i < n; ++i) check_adam(params[i], grads[i], ms[i], vs[i], host_cfg);
  AdamConfig cfg = host_cfg;
  if (step_values.defined()) {
    if (step_values.shape() != Shape{3} || step_values.dtype() != DType::float64 || !step_values.is_contiguous())
      throw ShapeError(fmt::format("adam_update_: step_values must be a contiguous float64 [3], got {} {}",
                                   dtype_name(step_values.dtype()), to_string(step_values.shape())));
    for (const Tensor& p : params)
      if (p.device() != step_values.device())
        throw DeviceError(fmt::format("adam_update_: step_values on {}, a parameter on {}",
                                      device_name(step_values.device()), device_name(p.device())));
    cfg.step_values = step_values.desc();
  }
  // One group per backend and dtype, in the order of their first parameter.
  std::vector<std::size_t> done(n, 0);
  for (std::size_t first = 0; first < n; ++first) {
    if (done[first]) continue;
    Backend& backend = params[first].backend();
    const DType dtype = params[first].dtype();
    std::vector<AdamTensors> group;
    for (std::size_t i = first; i < n; ++i) {
      if (done[i] || &params[i].backend() != &backend || params[i].dtype() != dtype) continue;
      group.push_back({params[i].desc(), grads[i].desc(), ms[i].desc(), vs[i].desc()});
      done[i] = 1;
    }
    backend.adam_update_many(group, cfg);
  }
  for (std::size_t i = 0; i < n; ++i)
    for (Tensor* t : {&params[i], &ms[i], &vs[i]}) t->bump_version();
}

}  // namespace stepformer
