// softmax and log_softmax over one dim, stable: the kernel subtracts the row's max before exp.
// The kernel works on contiguous rows of the last dim; another dim is moved last and back (views). bfloat16 input
// goes through float32.
#include "common.h"

namespace stepformer {

namespace {

Tensor softmax_impl(Op op, const char* name, const Tensor& a, std::int64_t dim) {
  detail::check_operands(name, {&a});
  if (a.dtype() == DType::bfloat16)
    // bfloat16 rows: the float32 kernel on the widened values, the result rounded once, as PyTorch's bfloat16
    // softmax keeps float32 statistics. Deviation: the backward reads the float32 output (PyTorch's reads its
    // bfloat16 output, a rounding apart) and keeps it, twice the bytes.
    return softmax_impl(op, name, a.to(DType::float32), dim).to(DType::bfloat16);
  detail::check_full_precision(name, a);
  const std::int64_t d = wrap_dim(name, dim, a.dim());
  const std::int64_t last = std::max<std::int64_t>(a.dim() - 1, 0);
  if (d != last) return transpose(softmax_impl(op, name, transpose(a, d, last), last), d, last);
  const bool log = op == Op::log_softmax;
  const Tensor x = contiguous(a);
  Tensor out = detail::empty_as(x, x.shape());
  x.backend().softmax_forward(out.desc(), x.desc(), log);
  record(op, out, {x}, {out}, [log](const Tensor& g, const Tensor& y) -> Gradients {
    const Tensor gc = contiguous(g);
    Tensor grad_in = detail::empty_as(gc, gc.shape());
    gc.backend().softmax_backward(grad_in.desc(), gc.desc(), y.desc(), log);
    return {grad_in};
  });
  return out;
}

}  // namespace

Tensor softmax(const Tensor& a, std::int64_t dim) { return softmax_impl(Op::softmax, "softmax", a, dim); }
Tensor log_softmax(const Tensor& a, std::int64_t dim) { return softmax_impl(Op::log_softmax, "log_softmax", a, dim); }

}  // namespace stepformer
