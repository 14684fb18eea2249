// Elementwise ops: forward and backward side by side. Binary ops broadcast; their backward sums the
// gradient back to each operand's shape with sum_to (a broadcast input was read many times, so its
// gradient is the sum of all those reads' gradients).
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "common.h"

namespace stepformer {
using detail::broadcast_desc;
using detail::check_floating;
using detail::check_operands;
using detail::empty_as;

namespace {

Tensor binary_kernel(const char* op, BinaryOp kind, const Tensor& a, const Tensor& b, DType out_dtype) {
  if (a.dtype() == DType::bfloat16) {  // in float32, rounded once (dtype.h)
    const DType wide = out_dtype == DType::bfloat16 ? DType::float32 : out_dtype;
    return detail::stored_as(binary_kernel(op, kind, detail::widen(a), detail::widen(b), wide), out_dtype);
  }
  const Shape shape = broadcast_shapes(op, a.shape(), b.shape());
  Tensor out = empty_as(a, shape, out_dtype);
  a.backend().binary(kind, out.desc(), broadcast_desc(a, shape), broadcast_desc(b, shape));
  return out;
}

Tensor unary_kernel(UnaryOp kind, const Tensor& a, double alpha = 0.0) {
  if (a.dtype() == DType::bfloat16) return detail::stored_as(unary_kernel(kind, detail::widen(a), alpha), a.dtype());
  Tensor out = empty_as(a, a.shape());
  a.backend().unary(kind, out.desc(), a.desc(), alpha);
  return out;
}

Tensor arith(const char* op, BinaryOp kind, const Tensor& a, const Tensor& b) {
  check_operands(op, {&a, &b});
  if (a.dtype() == DType::boolean)
    throw DTypeError(fmt::format("{}: arithmetic on bool tensors is not supported; convert with .to()", op));
  return binary_kernel(op, kind, a, b, a.dtype());
}

Tensor floating_unary(const char* op, UnaryOp kind, const Tensor& a, double alpha = 0.0) {
  check_operands(op, {&a});
  check_floating(op, a);
  return unary_kernel(kind, a, alpha);
}

}  // namespace

// An input that needs no gradient (x + PE: the table is a buffer) gets none: its sum_to would be thrown away.
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = arith("add", BinaryOp::add, a, b);
  record(Op::add, out, {a, b},
         [sa = a.shape(), sb = b.shape(), a_needs = a.requires_grad(),
          b_needs = b.requires_grad()](const Tensor& g) -> Gradients {
           return {a_needs ? sum_to(g, sa) : Tensor(), b_needs ? sum_to(g, sb) : Tensor()};
         });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = arith("sub", BinaryOp::sub, a, b);
  record(Op::sub, out, {a, b},
         [sa = a.shape(), sb = b.shape(), a_needs = a.requires_grad(),
          b_needs = b.requires_grad()](const Tensor& g) -> Gradients {
           return {a_needs ? sum_to(g, sa) : Tensor(), b_needs ? neg(sum_to(g, sb)) : Tensor()};
         });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = arith("mul", BinaryOp::mul, a, b);
  // x * mask multiplies by a constant: its gradient (a whole reduction) would be thrown away, so an input
  // that needs none gets an undefined gradient.
  const bool a_needs = a.requires_grad(), b_needs = b.requires_grad();
  record(
      Op::mul, out, {a, b}, {a, b}, [a_needs, b_needs](const Tensor& g, const Tensor& a, const Tensor& b) -> Gradients {
        // EXERCISE 0.1: the gradients of a * b with respect to a and to b.
        return {a_needs ? sum_to(mul(g, b), a.shape()) : Tensor(), b_needs ? sum_to(mul(g, a), b.shape()) : Tensor()};
        // END EXERCISE
      });
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = arith("div", BinaryOp::div, a, b);
  const bool a_needs = a.requires_grad(), b_needs = b.requires_grad();
  record(Op::div, out, {a, b}, {a, b},
         [a_needs, b_needs](const Tensor& g, const Tensor& a, const Tensor& b) -> Gradients {
           return {a_needs ? sum_to(div(g, b), a.shape()) : Tensor(),                        // d(a/b)/da = 1/b
                   b_needs ? sum_to(neg(div(mul(g, a), mul(b, b))), b.shape()) : Tensor()};  // = -a/b^2
         });
  return out;
}

namespace {
// x * 0.5, x + 0.5, x / 2: the number is a kernel argument, not a tensor, as PyTorch's Scalar overloads. Backward
// needs neither operand (mul and div keep both: the composite attention's scores * 1/sqrt(d_k) would hold its
// [T, T] scores for nothing), and a bfloat16 x meets the number unrounded, in float32 (PyTorch's opmath), where a
// bfloat16 0-d tensor would round the number first.
Tensor scale(const Tensor& a, double factor) {
  Tensor out = floating_unary("mul", UnaryOp::scale, a, factor);
  record(Op::scale, out, {a}, [factor](const Tensor& g) -> Gradients { return {scale(g, factor)}; });
  return out;
}

Tensor add_scalar(const Tensor& a, double number) {
  Tensor out = floating_unary("add", UnaryOp::add_scalar, a, number);
  record(Op::add_scalar, out, {a}, [](const Tensor& g) -> Gradients { return {g}; });
  return out;
}

Tensor div_scalar(const Tensor& a, double number) {
  Tensor out = floating_unary("div", UnaryOp::div_scalar, a, number);
  record(Op::div_scalar, out, {a}, [number](const Tensor& g) -> Gradients { return {div_scalar(g, number)}; });
  return out;
}

}  // namespace

Tensor neg(const Tensor& a) {
  check_operands("neg", {&a});
  if (a.dtype() == DType::boolean) throw DTypeError("neg: cannot negate a bool tensor; use logical_not");
  Tensor out = unary_kernel(UnaryOp::neg, a);
  record(Op::neg, out, {a}, [](const Tensor& g) -> Gradients { return {neg(g)}; });
  return out;
}

Tensor pow(const Tensor& a, double p) {
  Tensor out = floating_unary("pow", UnaryOp::pow, a, p);
  record(Op::pow, out, {a}, {a},
         [p](const Tensor& g, const Tensor& a) -> Gradients { return {mul(g, pow(a, p - 1.0) * p)}; });
  return out;
}

Tensor exp(const Tensor& a) {
  Tensor out = floating_unary("exp", UnaryOp::exp, a);
  record(Op::exp, out, {a}, {out}, [](const Tensor& g, const Tensor& y) -> Gradients { return {mul(g, y)}; });
  return out;
}

Tensor log(const Tensor& a) {
  Tensor out = floating_unary("log", UnaryOp::log, a);
  record(Op::log, out, {a}, {a}, [](const Tensor& g, const Tensor& a) -> Gradients { return {div(g, a)}; });
  return out;
}

Tensor sqrt(const Tensor& a) {
  Tensor out = floating_unary("sqrt", UnaryOp::sqrt, a);
  record(Op::sqrt, out, {a}, {out}, [](const Tensor& g, const Tensor& y) -> Gradients { return {div(g, y * 2.0)}; });
  return out;
}

Tensor rsqrt(const Tensor& a) {
  Tensor out = floating_unary("rsqrt", UnaryOp::rsqrt, a);
  record(Op::rsqrt, out, {a}, {out},
         [](const Tensor& g, const Tensor& y) -> Gradients { return {mul(g, pow(y, 3.0) * -0.5)}; });
  return out;
}

namespace {
// An activation whose backward is one kernel, grad_in = backward(g, saved): `saved` is the input for
// gelu and silu, and the output for tanh (its derivative 1 - y^2 needs only y).
Tensor activation(Op op, const char* name, UnaryOp forward, BinaryOp backward, const Tensor& a, bool saves_output) {
  Tensor out = floating_unary(name, forward, a);
  record(op, out, {a}, {saves_output ? out : a}, [backward](const Tensor& g, const Tensor& saved) -> Gradients {
    return {binary_kernel("backward", backward, g, saved, g.dtype())};
  });
  return out;
}
}  // namespace

Tensor tanh(const Tensor& a) {
  return activation(Op::tanh, "tanh", UnaryOp::tanh, BinaryOp::tanh_backward, a, /*saves_output=*/true);
}
// relu's derivative is 0 or 1, so its backward keeps only where the input was positive: one byte an element,
// where the input would be four (PyTorch keeps its float output). In the base model's step that is the
// feed-forward layers' [tokens, d_ff] hidden units: docs/performance.md measures it. out > 0 exactly where
// a > 0; a NaN compares false either way.
Tensor relu(const Tensor& a) {
  Tensor out = floating_unary("relu", UnaryOp::relu, a);
  // The mask only for a graph that will keep it (record makes no node otherwise).
  const Tensor positive = grad_enabled() && a.requires_grad() ? gt(out, detail::scalar_like("relu", out, 0)) : Tensor();
  record(Op::relu, out, {a}, {positive}, [](const Tensor& g, const Tensor& positive) -> Gradients {
    return {where(positive, g, detail::scalar_like("relu", g, 0))};
  });
  return out;
}
Tensor gelu(const Tensor& a) {
  return activation(Op::gelu, "gelu", UnaryOp::gelu, BinaryOp::gelu_backward, a, /*saves_output=*/false);
}
Tensor silu(const Tensor& a) {
  return activation(Op::silu, "silu", UnaryOp::silu, BinaryOp::silu_backward, a, /*saves_output=*/false);
}

Tensor swiglu(const Tensor& gate, const Tensor& value) {
  check_operands("swiglu", {&gate, &value});
  check_floating("swiglu", gate);
  if (gate.shape() != value.shape())
    throw ShapeError(fmt::format("swiglu: gate {} and value {} must have the same shape", to_string(gate.shape()),
                                 to_string(value.shape())));
  Tensor out = binary_kernel("swiglu", BinaryOp::silu_mul, gate, value, gate.dtype());
  record(Op::swiglu, out, {gate, value}, {gate, value},
         [](const Tensor& g, const Tensor& gate_in, const Tensor& value_in) -> Gradients {
           // EXERCISE 12.3: ggate = g value silu'(gate); gvalue = g silu(gate)
           const Tensor g_gate =
               binary_kernel("backward", BinaryOp::silu_backward, mul(g, value_in), gate_in, g.dtype());
           const Tensor g_value = binary_kernel("backward", BinaryOp::silu_mul, gate_in, g, g.dtype());
           return {g_gate, g_value};
           // END EXERCISE
         });
  return out;
}

// --- comparisons and selection --------------------------------------------------------------------------

namespace {
Tensor compare(const char* op, BinaryOp kind, const Tensor& a, const Tensor& b) {
  check_operands(op, {&a, &b});
  return binary_kernel(op, kind, a, b, DType::boolean);
}
}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare("eq", BinaryOp::eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare("ne", BinaryOp::ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare("lt", BinaryOp::lt, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare("gt", BinaryOp::gt, a, b); }

Tensor logical_not(const Tensor& mask) {
  check_operands("logical_not", {&mask});
  detail::check_dtype("logical_not", mask, DType::boolean, "the mask");
  return unary_kernel(UnaryOp::logical_not, mask);
}

Tensor logical_or(const Tensor& a, const Tensor& b) {
  check_operands("logical_or", {&a, &b});
  detail::check_dtype("logical_or", a, DType::boolean, "the first mask");
  return where(a, full({}, 1.0, {DType::boolean, a.device()}), b);  // a ? true : b
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_operands("where", {&cond, &a, &b}, /*same_dtype=*/false);
  check_operands("where", {&a, &b});
  detail::check_dtype("where", cond, DType::boolean, "the condition");
  const Shape shape = broadcast_shapes("where", broadcast_shapes("where", cond.shape(), a.shape()), b.shape());
  Tensor out = empty_as(a, shape);
  a.backend().where(out.desc(), broadcast_desc(cond, shape), broadcast_desc(a, shape), broadcast_desc(b, shape));
  const bool a_needs = a.requires_grad(), b_needs = b.requires_grad();
  record(
      Op::where, out, {a, b}, {cond},
      [sa = a.shape(), sb = b.shape(), a_needs, b_needs](const Tensor& g, const Tensor& c) -> Gradients {
        const Tensor zero = detail::scalar_like("where", g, 0);
        return {a_needs ? sum_to(where(c, g, zero), sa) : Tensor(), b_needs ? sum_to(where(c, zero, g), sb) : Tensor()};
      });
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_operands("masked_fill", {&x, &mask}, /*same_dtype=*/false);
  detail::check_dtype("masked_fill", mask, DType::boolean, "the mask");
  if (broadcast_shapes("masked_fill", x.shape(), mask.shape()) != x.shape())
    throw ShapeError(fmt::format("masked_fill: mask of shape {} does not broadcast to the input's shape {}",
                                 to_string(mask.shape()), to_string(x.shape())));
  return where(mask, detail::scalar_like("masked_fill", x, value), x);
}

// --- dtype conversion -------------------------------------------------------------------------------------

namespace {
// Whether t's elements fill a block of memory exactly once in some order of its dims (a transposed or permuted
// contiguous tensor): its strides, sorted, are those of a contiguous tensor of its sizes in that order.
bool dense_permuted(const Tensor& t) {
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (stride, size), size-1 dims left out
  for (std::int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) != 1) dims.emplace_back(t.strides()[static_cast<std::size_t>(d)], t.size(d));
  std::sort(dims.begin(), dims.end());
  std::int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

// The same n elements as one unit-stride row from `first` (for a copy between two tensors of one dense layout).
TensorDesc flat_desc(TensorDesc d, std::int64_t n) {
  d.ndim = 1;
  d.shape[0] = n;
  d.strides[0] = 1;
  return d;
}
}  // namespace

Tensor Tensor::to(DType target) const {
  if (dtype() == target) return *this;
  if (Tensor kept = detail::autocast_kept(*this, target); kept.defined()) return kept;
  Tensor out;
  if (!is_contiguous() && dense_permuted(*this)) {
    // As torch's preserve_format: a permuted dense tensor (a transposed weight) converts into the same layout, one
    // unit-stride pass in memory order, where converting into a contiguous tensor would gather along its strides.
    const Tensor buffer = empty({numel()}, {target, device(), false});
    out = detail::make_view(buffer, shape(), strides(), 0);
    backend().unary(UnaryOp::copy, flat_desc(buffer.desc(), numel()), flat_desc(desc(), numel()), 0.0);
  } else {
    out = empty(shape(), {target, device(), false});
    backend().unary(UnaryOp::copy, out.desc(), desc(), 0.0);
  }
  if (is_floating(target))
    record(Op::to_dtype, out, {*this}, [from = dtype()](const Tensor& g) -> Gradients { return {g.to(from)}; });
  detail::autocast_keep(*this, out);
  return out;
}

// Through host memory: simple, and the only path between two different backends (a real GPU would
// use cudaMemcpy directly; the copy through the host costs one extra memcpy).
Tensor Tensor::to(Device target) const {
  if (device() == target) return *this;
  const Tensor c = contiguous(detach());
  const std::size_t bytes = static_cast<std::size_t>(c.numel()) * element_size(dtype());
  std::vector<unsigned char> host(bytes);
  if (bytes) c.backend().copy_to_host(host.data(), c.desc().data, bytes);
  Tensor out = empty(shape(), {dtype(), target, false});
  if (bytes) out.backend().copy_from_host(out.desc().data, host.data(), bytes);
  if (is_floating(dtype()))
    record(Op::to_device, out, {*this}, [from = device()](const Tensor& g) -> Gradients { return {g.to(from)}; });
  return out;
}

// --- operators --------------------------------------------------------------------------------------------
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, double b) {
  return is_floating(a.dtype()) ? add_scalar(a, b) : add(a, detail::scalar_like("add", a, b));
}
Tensor operator-(const Tensor& a, double b) {  // a + (-b): the same rounded result (IEEE 754 defines a - b so)
  return is_floating(a.dtype()) ? add_scalar(a, -b) : sub(a, detail::scalar_like("sub", a, b));
}
Tensor operator*(const Tensor& a, double b) {
  return is_floating(a.dtype()) ? scale(a, b) : mul(a, detail::scalar_like("mul", a, b));
}
Tensor operator/(const Tensor& a, double b) {
  return is_floating(a.dtype()) ? div_scalar(a, b) : div(a, detail::scalar_like("div", a, b));
}
Tensor operator+(double a, const Tensor& b) { return b + a; }
Tensor operator-(double a, const Tensor& b) {
  return is_floating(b.dtype()) ? add_scalar(neg(b), a) : sub(detail::scalar_like("sub", b, a), b);
}
Tensor operator*(double a, const Tensor& b) { return b * a; }
// The number is the dividend: a 0-d tensor of b's dtype (div keeps b and it; in bfloat16 the number is rounded).
Tensor operator/(double a, const Tensor& b) { return div(detail::scalar_like("div", b, a), b); }

}  // namespace stepformer
