// rotate_pairs, fused: the rotation of rotary position embeddings (RoFormer, Su et al. 2021) in one kernel, where
// the composite takes two narrows, four products, a difference, a sum and a concatenation, each a pass over
// memory. x is read through its strides (the heads of q and k are a permuted view), so no contiguous copy comes
// first. The backward rotates the gradient by the opposite angle, in the same kernel.
#include "common.h"

namespace stepformer {

Tensor rotate_pairs(const Tensor& x, const Tensor& cos, const Tensor& sin, RopePairing pairing) {
  detail::check_operands("rotate_pairs", {&x, &cos, &sin});
  detail::check_full_precision("rotate_pairs", x);
  if (x.dim() < 2 || x.size(-1) % 2 != 0)
    throw ShapeError(fmt::format("rotate_pairs: x must be [..., T, D] with D even, got {}", to_string(x.shape())));
  const Shape tables{x.size(-2), x.size(-1) / 2};
  if (cos.shape() != tables || sin.shape() != tables)
    throw ShapeError(fmt::format("rotate_pairs: cos and sin must be {} for x of shape {}, got {} and {}",
                                 to_string(tables), to_string(x.shape()), to_string(cos.shape()),
                                 to_string(sin.shape())));
  if (cos.requires_grad() || sin.requires_grad())
    throw ValueError("rotate_pairs: the cos and sin tables take no gradient; pass them detached");
  // The kernel walks any strides but the last: a row's coordinates must be adjacent.
  const Tensor xs = x.strides().back() == 1 ? x : contiguous(x);
  const Tensor c = contiguous(cos), s = contiguous(sin);
  Tensor y = detail::empty_as(xs, xs.shape());
  xs.backend().rotate_pairs(y.desc(), xs.desc(), c.desc(), s.desc(), pairing, /*inverse=*/false);
  record(Op::rotate_pairs, y, {xs}, {c, s}, [pairing](const Tensor& g, const Tensor& c, const Tensor& s) -> Gradients {
    const Tensor gs = g.strides().back() == 1 ? g : contiguous(g);
    Tensor dx = detail::empty_as(gs, gs.shape());
    gs.backend().rotate_pairs(dx.desc(), gs.desc(), c.desc(), s.desc(), pairing, /*inverse=*/true);
    return {dx};
  });
  return y;
}

}  // namespace stepformer
