#include "common.h"
#include <fmt/format.h>

#include <cmath>

namespace stepformer::detail {

void check_ndim(const char* op, const Shape& shape) {
  if (shape.size() > static_cast<std::size_t>(kMaxDims))
    throw ShapeError(fmt::format("{}: shape {} has {} dims; at most {} are supported", op, to_string(shape),
                                 shape.size(), kMaxDims));
}

void check_operands(const char* op, std::initializer_list<const Tensor*> ts, bool same_dtype) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t->defined()) throw Error(fmt::format("{}: an operand is an undefined tensor", op));
    if (!first) {
      first = t;
      continue;
    }
    if (t->device() != first->device())
      throw DeviceError(fmt::format("{}: operands are on different devices ({} and {}); move one with .to()", op,
                                    device_name(first->device()), device_name(t->device())));
    if (same_dtype && t->dtype() != first->dtype())
      throw DTypeError(fmt::format("{}: operands have different dtypes ({} {} and {} {}); convert one with .to()", op,
                                   dtype_name(first->dtype()), to_string(first->shape()), dtype_name(t->dtype()),
                                   to_string(t->shape())));
  }
}

void check_floating(const char* op, const Tensor& t) {
  if (!is_floating(t.dtype()))
    throw DTypeError(fmt::format("{}: expected a floating tensor (float32, float64 or bfloat16), got {} {}", op,
                                 dtype_name(t.dtype()), to_string(t.shape())));
}

void check_full_precision(const char* op, const Tensor& t) {
  if (t.dtype() == DType::bfloat16)
    throw DTypeError(
        fmt::format("{}: needs float32 or float64, got bfloat16 {}: it keeps its statistics in full "
                    "precision; convert with .to(DType::float32) (autocast does this)",
                    op, to_string(t.shape())));
  if (!is_floating(t.dtype()))
    throw DTypeError(fmt::format("{}: expected a floating tensor (float32 or float64), got {} {}", op,
                                 dtype_name(t.dtype()), to_string(t.shape())));
}

namespace {
Tensor converted(const Tensor& t, DType dtype) {
  Tensor out = empty_as(t, t.shape(), dtype);
  t.backend().unary(UnaryOp::copy, out.desc(), t.desc(), 0.0);
  return out;
}
}  // namespace

Tensor widen(const Tensor& t) { return t.dtype() == DType::bfloat16 ? converted(t, DType::float32) : t; }
Tensor stored_as(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : converted(t, dtype); }

void check_dtype(const char* op, const Tensor& t, DType expected, const char* what) {
  if (t.dtype() != expected)
    throw DTypeError(fmt::format("{}: {} must be {}, got {} {}", op, what, dtype_name(expected), dtype_name(t.dtype()),
                                 to_string(t.shape())));
}

Tensor make_view(const Tensor& base, Shape shape, Shape strides, std::int64_t offset) {
  check_ndim("view", shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl()->storage;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  impl->device = base.device();
  return Tensor(std::move(impl));
}

Tensor empty_as(const Tensor& like, const Shape& shape, DType dtype) {
  return empty(shape, {dtype, like.device(), false});
}

void check_number_fits(const char* op, double value, DType dtype, const Shape& shape) {
  const bool fits = std::trunc(value) == value && value >= -0x1p63 && value < 0x1p63;
  if (dtype == DType::int64 && !fits)
    throw DTypeError(
        fmt::format("{}: the number {} is not an int64, the dtype of the tensor {} (no type promotion: "
                    "convert the tensor with .to(DType::float32) first)",
                    op, value, to_string(shape)));
}

Tensor scalar_like(const char* op, const Tensor& like, double value) {
  check_number_fits(op, value, like.dtype(), like.shape());
  return full({}, value, {like.dtype(), like.device(), false});
}

TensorDesc broadcast_desc(const Tensor& t, const Shape& shape) {
  TensorDesc d = t.desc();
  const int n = static_cast<int>(shape.size());
  const int shift = n - d.ndim;
  TensorDesc out = d;
  out.ndim = n;
  for (int i = n - 1; i >= 0; --i) {
    const int j = i - shift;
    out.shape[i] = shape[static_cast<std::size_t>(i)];
    out.strides[i] = (j < 0 || d.shape[j] == 1) ? 0 : d.strides[j];
  }
  return out;
}

}  // namespace stepformer::detail
