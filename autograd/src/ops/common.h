#pragma once
// Helpers shared by the op files: argument checks with uniform messages, and output allocation.
#include <fmt/format.h>

#include <initializer_list>

#include "autograd/engine.h"
#include "autograd/errors.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"

namespace stepformer::detail {

// Every operand must be defined, on the same device and (when `same_dtype`) of the same dtype.
void check_operands(const char* op, std::initializer_list<const Tensor*> ts, bool same_dtype = true);
void check_floating(const char* op, const Tensor& t);
void check_dtype(const char* op, const Tensor& t, DType expected, const char* what);

// A tensor sharing `base`'s storage with another shape, strides and offset (no history).
Tensor make_view(const Tensor& base, Shape shape, Shape strides, std::int64_t offset);
// A new contiguous tensor like `like` (dtype, device) of `shape`.
Tensor empty_as(const Tensor& like, const Shape& shape, DType dtype);
inline Tensor empty_as(const Tensor& like, const Shape& shape) { return empty_as(like, shape, like.dtype()); }
// A 0-dim tensor holding `value`, of `like`'s dtype and device.
Tensor scalar_like(const Tensor& like, double value);
// `t` with its shape viewed through stride-0 dims as `shape` (for kernels: no history).
TensorDesc broadcast_desc(const Tensor& t, const Shape& shape);
// The shape as a TensorDesc-compatible check (kMaxDims).
void check_ndim(const char* op, const Shape& shape);

}  // namespace stepformer::detail
