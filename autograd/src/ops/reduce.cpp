// Reductions over dims, and sum_to: the backward of broadcasting.
#include <algorithm>

#include "common.h"

namespace stepformer {
using detail::check_operands;

namespace {

// Which dims are reduced (all when `dims` is empty), as a mask; DimError on a bad or repeated dim.
std::vector<bool> reduced_dims(const char* op, const Tensor& a, const std::vector<std::int64_t>& dims) {
  std::vector<bool> mask(static_cast<std::size_t>(a.dim()), dims.empty());
  for (std::int64_t d : dims) {
    const auto w = static_cast<std::size_t>(wrap_dim(op, d, a.dim()));
    if (a.dim() == 0) continue;
    if (mask[w]) throw DimError(fmt::format("{}: dim {} is listed twice", op, d));
    mask[w] = true;
  }
  return mask;
}

Shape keepdim_shape(const Tensor& a, const std::vector<bool>& mask) {
  Shape s = a.shape();
  for (std::size_t i = 0; i < s.size(); ++i)
    if (mask[i]) s[i] = 1;
  return s;
}

Shape dropped_shape(const Tensor& a, const std::vector<bool>& mask) {
  Shape s;
  for (std::size_t i = 0; i < mask.size(); ++i)
    if (!mask[i]) s.push_back(a.shape()[i]);
  return s;
}

Tensor reduce_kernel(ReduceOp kind, const Tensor& a, const Shape& kept) {
  if (a.dtype() == DType::bfloat16) return detail::stored_as(reduce_kernel(kind, detail::widen(a), kept), a.dtype());
  Tensor out = detail::empty_as(a, kept);
  a.backend().reduce(kind, out.desc(), a.desc());
  return out;
}

// The gradient of a reduction's output, viewed with size-1 dims where the input had reduced dims.
Tensor as_keepdim(const Tensor& g, const Shape& kept) { return reshape(g, kept); }

}  // namespace

Tensor sum(const Tensor& a, const std::vector<std::int64_t>& dims, bool keepdim) {
  check_operands("sum", {&a});
  if (a.dtype() == DType::boolean) throw DTypeError("sum: convert a bool tensor with .to() before summing");
  const auto mask = reduced_dims("sum", a, dims);
  const Shape kept = keepdim_shape(a, mask);
  Tensor out = reduce_kernel(ReduceOp::sum, a, kept);
  if (!keepdim) out = detail::make_view(out, dropped_shape(a, mask), contiguous_strides(dropped_shape(a, mask)), 0);
  record(Op::sum, out, {a},
         [kept, s = a.shape()](const Tensor& g) -> Gradients { return {expand(as_keepdim(g, kept), s)}; });
  return out;
}

Tensor mean(const Tensor& a, const std::vector<std::int64_t>& dims, bool keepdim) {
  check_operands("mean", {&a});
  detail::check_floating("mean", a);
  const auto mask = reduced_dims("mean", a, dims);
  const Shape kept = keepdim_shape(a, mask);
  // Elements per output; 0 when a reduced dim is empty, and then 0 * (1/0) gives NaN, as torch.mean.
  const std::int64_t count = numel(kept) == 0 ? 0 : a.numel() / numel(kept);
  const Tensor x = detail::widen(a);  // a bfloat16 mean is summed and scaled in float32, rounded once
  const Tensor total = reduce_kernel(ReduceOp::sum, x, kept);
  Tensor out = detail::empty_as(x, keepdim ? kept : dropped_shape(a, mask));
  x.backend().unary(UnaryOp::scale, out.desc(), reshape(total, out.shape()).desc(), 1.0 / static_cast<double>(count));
  out = detail::stored_as(out, a.dtype());
  record(Op::mean, out, {a}, [kept, count, s = a.shape()](const Tensor& g) -> Gradients {
    return {expand(as_keepdim(g, kept), s) / static_cast<double>(count)};
  });
  return out;
}

Tensor max(const Tensor& a, const std::vector<std::int64_t>& dims, bool keepdim) {
  check_operands("max", {&a});
  if (a.numel() == 0) throw ShapeError(fmt::format("max: the input {} has no elements", to_string(a.shape())));
  const auto mask = reduced_dims("max", a, dims);
  const Shape kept = keepdim_shape(a, mask);
  Tensor kept_out = reduce_kernel(ReduceOp::max, a, kept);
  Tensor out = keepdim ? kept_out : reshape(kept_out, dropped_shape(a, mask));
  // Gradient goes to the maxima; ties share it equally (torch.amax), so the sum of the gradient is kept.
  record(Op::max, out, {a}, {a, kept_out},
         [kept, dims](const Tensor& g, const Tensor& sa, const Tensor& y) -> Gradients {
           const Tensor hit = eq(sa, y).to(g.dtype());  // [a.shape] 1 at maxima
           const Tensor count = sum(hit, dims, true);   // [kept]
           return {mul(hit, as_keepdim(g, kept) / count)};
         });
  return out;
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const std::size_t lead = g.shape().size() - shape.size();
  if (g.shape().size() < shape.size() || broadcast_shapes("sum_to", g.shape(), shape) != g.shape())
    throw ShapeError(fmt::format("sum_to: shape {} does not broadcast to {}", to_string(shape), to_string(g.shape())));
  // EXERCISE 0.3: sum the broadcast dimensions of g away (leading ones, and those where shape has 1).
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < g.shape().size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && g.shape()[i] != 1)) dims.push_back(static_cast<std::int64_t>(i));
  return reshape(sum(g, dims, true), shape);
  // END EXERCISE
}

Tensor sum_of_squares(const std::vector<Tensor>& tensors) {
  if (tensors.empty()) throw ValueError("sum_of_squares: needs at least one tensor");
  for (const Tensor& t : tensors) {
    check_operands("sum_of_squares", {&tensors[0], &t}, false);
    detail::check_floating("sum_of_squares", t);
  }
  const NoGradGuard no_grad;
  const auto n = static_cast<std::int64_t>(tensors.size());
  Tensor out = empty({n}, {DType::float64, tensors[0].device()});
  std::vector<Tensor> kept;  // contiguous, alive until the kernels have read them
  std::vector<TensorDesc> descs;
  for (const Tensor& t : tensors) {
    kept.push_back(contiguous(t));
    descs.push_back(kept.back().desc());
  }
  const bool one_dtype =
      std::all_of(tensors.begin(), tensors.end(), [&](const Tensor& t) { return t.dtype() == tensors[0].dtype(); });
  if (one_dtype && out.backend().sum_squares_many(out.desc(), descs)) return out;
  std::vector<Tensor> sums;
  for (const Tensor& t : tensors) sums.push_back(sum(t * t).to(DType::float64));
  return stack(sums, 0);
}

}  // namespace stepformer
