// matmul with torch.matmul's rules. A transposed operand reaches the GEMM kernel as swapped strides,
// never as a copy, and the backward's transposes are views too. Under autocast (autograd/autocast.h) the
// float32 operands are cast to bfloat16 first and the product is float32.
#include "autograd/autocast.h"
#include "common.h"

namespace stepformer {

namespace {

// a [..., M, K] @ b [..., K, N] -> [batch..., M, N], both at least 2-D; the product is `out_dtype` (a's
// dtype, or float32 for bfloat16 operands under autocast), and so are the backward's products, the gradients
// of a and b, unless `grad_dtype` says otherwise (float32 for autocast's bfloat16 copies: see matmul).
// `b_source`, when defined, is what backward keeps in place of b: the memory b was cast from, cast again there.
Tensor matmul_nd(const Tensor& a, const Tensor& b, DType out_dtype, DType grad_dtype, const Tensor& b_source = {}) {
  const std::int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  if (b.size(-2) != K)
    throw ShapeError(fmt::format("matmul: inner dimensions differ: {} @ {} ({} vs {})", to_string(a.shape()),
                                 to_string(b.shape()), K, b.size(-2)));
  const Shape batch = broadcast_shapes("matmul", Shape(a.shape().begin(), a.shape().end() - 2),
                                       Shape(b.shape().begin(), b.shape().end() - 2));
  auto with = [&batch](std::int64_t r, std::int64_t c) {
    Shape s = batch;
    s.push_back(r);
    s.push_back(c);
    return s;
  };
  Tensor out = detail::empty_as(a, with(M, N), out_dtype);
  a.backend().gemm(out.desc(), detail::broadcast_desc(a, with(M, K)), detail::broadcast_desc(b, with(K, N)), 1.0, 0.0);
  // Each gradient reads only the other operand: keep an operand alive only if the other one needs it.
  const bool a_needs = a.requires_grad(), b_needs = b.requires_grad();
  // An undefined saved operand: the other input needs no gradient.
  // A transposed matrix b (Linear's W^T: strides 1 and K) gets its gradient in its own layout, as PyTorch's
  // mm_mat2_backward does: then W's gradient lies as W does, and its leaf takes it without a copy (engine.cpp).
  const bool b_transposed = b.dim() == 2 && K > 1 && N > 1 && b.strides()[0] == 1 && b.strides()[1] == K;
  record(Op::matmul, out, {a, b}, {b_needs ? a : Tensor(), a_needs ? (b_source.defined() ? b_source : b) : Tensor()},
         [a_shape = a.shape(), b_shape = b.shape(), dtype = a.dtype(), grad_dtype, b_transposed](
             const Tensor& grad, const Tensor& sa, const Tensor& kept_b) -> Gradients {
           const Tensor sb = kept_b.defined() ? kept_b.to(dtype) : kept_b;  // a kept source is cast again
           // The backward's products read the operands' dtype: a float32 gradient of a bfloat16 product
           // is rounded to bfloat16 first, as PyTorch's bfloat16 matmul receives a bfloat16 gradient.
           const Tensor g = detail::stored_as(grad, dtype);
           const auto product = [grad_dtype, b_transposed](const Tensor& x, const Tensor& y) {
             // grad mode is off in a backward: no history. b's gradient x^T-first (x is a^T, a column-major
             // matrix) for a transposed b: (y^T x^T)^T, the same sums laid out as b.
             if (b_transposed && x.dim() == 2 && y.dim() == 2 && x.strides()[0] == 1)
               return transpose(matmul_nd(transpose(y, 0, 1), transpose(x, 0, 1), grad_dtype, grad_dtype), 0, 1);
             return matmul_nd(x, y, grad_dtype, grad_dtype);
           };
           // EXERCISE 0.2: the gradients of a @ b with respect to a and to b.
           return {sb.defined() ? sum_to(product(g, transpose(sb, -1, -2)), a_shape) : Tensor(),
                   sa.defined() ? sum_to(product(transpose(sa, -1, -2), g), b_shape) : Tensor()};
           // END EXERCISE
         });
  return out;
}

// What matmul multiplies inside a bfloat16 autocast scope, and the dtype of its product.
struct Autocast {
  Tensor a, b;
  DType product;
};
Autocast autocast_operands(const Tensor& a, const Tensor& b) {
  // EXERCISE 11.2: float32 operands become bfloat16 copies by to(); the product float32
  if (a.dtype() != DType::float32) return {a, b, a.dtype()};  // float64 and bfloat16 are left as they are
  return {a.to(DType::bfloat16), b.to(DType::bfloat16), DType::float32};
  // END EXERCISE
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  detail::check_operands("matmul", {&a_in, &b_in});
  detail::check_floating("matmul", a_in);
  const Autocast cast =
      autocast_dtype() == DType::bfloat16 ? autocast_operands(a_in, b_in) : Autocast{a_in, b_in, a_in.dtype()};
  const Tensor &a = cast.a, &b = cast.b;
  const DType out_dtype = cast.product;
  // Autocast's copies hand their gradients to the casts as the backward products' float32 sums, which the
  // casts' backward passes on as they are, where a bfloat16 gradient would be rounded once and widened
  // again (two passes and a buffer per gradient). PyTorch's bfloat16 matmul returns its gradients rounded to
  // bfloat16; ours are float32, as its forward product is (deviation, docs/11_mixed_precision.md). Only when
  // every operand that needs a gradient is a cast made here: nothing else reads them, so no other gradient
  // meets the float32 one.
  const bool past_casts = out_dtype != a.dtype() && (a.requires_grad() || b.requires_grad()) &&
                          (!a.requires_grad() || detail::is_cast_of(a, a_in)) &&
                          (!b.requires_grad() || detail::is_cast_of(b, b_in));
  const DType grad_dtype = past_casts ? out_dtype : a.dtype();
  // A parameter's bfloat16 copy is not kept for backward: the parameter lives through the step anyway, so
  // backward casts it again. One more pass over the weights, where keeping each copy from its forward to its
  // backward cost 2 bytes a parameter (the base step's peak RSS 1,399 -> 1,345 MB, docs/performance.md).
  // Deviation: PyTorch's autocast keeps the copy.
  const Tensor b_source =
      b.dim() >= 2 && b.dtype() != b_in.dtype() && detail::is_cast_of(b, b_in) && detail::views_parameter(b_in)
          ? b_in
          : Tensor();
  if (a.dim() == 0 || b.dim() == 0)
    throw ShapeError(fmt::format("matmul: both operands need at least 1 dim, got {} @ {}", to_string(a.shape()),
                                 to_string(b.shape())));
  // A 1-D operand is a row (left) or a column (right) vector; the added dim is removed afterwards.
  const Tensor a2 = a.dim() == 1 ? unsqueeze(a, 0) : a;
  const Tensor b2 = b.dim() == 1 ? unsqueeze(b, 1) : b;
  Tensor out;
  if (a2.dim() > 2 && b2.dim() == 2 && a2.size(-1) == b2.size(0)) {
    // [..., M, K] @ [K, N] is one [(... M), K] @ [K, N] product: a single GEMM, whose weight gradient is
    // one GEMM too instead of a batched product summed over the batch (as torch.matmul folds).
    Shape shape = a2.shape();
    shape.back() = b2.size(1);
    out = reshape(matmul_nd(reshape(a2, {-1, a2.size(-1)}), b2, out_dtype, grad_dtype, b_source), shape);
  } else {
    out = matmul_nd(a2, b2, out_dtype, grad_dtype, b_source);
  }
  if (b.dim() == 1) out = squeeze(out, -1);
  if (a.dim() == 1) out = squeeze(out, b.dim() == 1 ? -1 : -2);
  return out;
}

}  // namespace stepformer
