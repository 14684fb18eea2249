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
void check_floating(const char* op, const Tensor& t);  // float32, float64 or bfloat16
// float32 or float64: the row ops (softmax, layer norm, losses, embedding, dropout) and the optimizer keep
// their statistics and state in full precision; a bfloat16 operand is a DTypeError naming the op.
void check_full_precision(const char* op, const Tensor& t);

// bfloat16 operands of elementwise ops and reductions are computed in float32 and the result rounded once
// (dtype.h). widen: a float32 copy of a bfloat16 tensor, any other tensor itself; stored_as: `t` converted to
// `dtype` (bfloat16) or itself. Neither records history: the op around them does.
Tensor widen(const Tensor& t);
Tensor stored_as(const Tensor& t, DType dtype);
void check_dtype(const char* op, const Tensor& t, DType expected, const char* what);

// A tensor sharing `base`'s storage with another shape, strides and offset (no history).
Tensor make_view(const Tensor& base, Shape shape, Shape strides, std::int64_t offset);
// A new contiguous tensor like `like` (dtype, device) of `shape`.
Tensor empty_as(const Tensor& like, const Shape& shape, DType dtype);
inline Tensor empty_as(const Tensor& like, const Shape& shape) { return empty_as(like, shape, like.dtype()); }
// A number written into a tensor of `dtype` (full, fill_, masked_fill, x * 0.5) must be one of its values: an int64
// tensor takes whole numbers in range, else a DTypeError naming op, the number and the tensor (a cast would truncate
// 0.5 to 0 silently; there is no type promotion).
void check_number_fits(const char* op, double value, DType dtype, const Shape& shape);
// A 0-dim tensor holding `value`, of `like`'s dtype and device (checked as above for `op`).
Tensor scalar_like(const char* op, const Tensor& like, double value);
// `t` with its shape viewed through stride-0 dims as `shape` (for kernels: no history).
TensorDesc broadcast_desc(const Tensor& t, const Shape& shape);
// While a node's backward function runs (engine.cpp), a tensor a kernel or at() reads must be the gradient, one
// of the node's saved tensors, or made during that backward; anything else is an AutogradError naming the op.
void check_backward_read(const Tensor& t);
// Tensor::to's side of autocast's cache (autocast.cpp): the kept conversion of `source` to `target`, or an undefined
// tensor; and keep one.
Tensor autocast_kept(const Tensor& source, DType target);
void autocast_keep(const Tensor& source, const Tensor& converted);
// Whether `copy` is the output of a recorded to() of `source` itself: the cast's backward then takes a gradient in
// source's dtype as it is (Tensor::to of a tensor already in that dtype is the tensor), so an op reading
// `copy` may return source's dtype for it (matmul under autocast).
bool is_cast_of(const Tensor& copy, const Tensor& source);
// Whether t is a parameter (a leaf that requires grad) or a view of one (Linear's transposed weight): memory
// that outlives the graph, so that a node may keep it where it would otherwise keep a copy of it.
bool views_parameter(const Tensor& t);
// The shape as a TensorDesc-compatible check (kMaxDims).
void check_ndim(const char* op, const Shape& shape);

}  // namespace stepformer::detail
