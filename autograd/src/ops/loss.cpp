// Cross-entropy fused with log-softmax, as torch.nn.functional.cross_entropy:
//   loss_i = -(1 - s) log p_i[t_i] - (s / C) sum_c log p_i[c],   p_i = softmax(logits_i)
// with label smoothing s (Szegedy et al. 2016; the paper uses s = 0.1). Targets equal to ignore_index
// contribute nothing, and the mean divides by the number of the others.
#include "common.h"

namespace stepformer {

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index, double smoothing,
                     Reduction reduction) {
  detail::check_operands("cross_entropy", {&logits, &targets}, /*same_dtype=*/false);
  detail::check_full_precision("cross_entropy", logits);
  detail::check_dtype("cross_entropy", targets, DType::int64, "targets");
  if (logits.dim() < 1 || Shape(logits.shape().begin(), logits.shape().end() - 1) != targets.shape())
    throw ShapeError(fmt::format("cross_entropy: logits {} must be targets' shape {} plus a class dim",
                                 to_string(logits.shape()), to_string(targets.shape())));
  if (!(smoothing >= 0 && smoothing <= 1))
    throw ValueError(fmt::format("cross_entropy: label_smoothing must be in [0, 1], got {}", smoothing));
  const std::int64_t C = logits.size(-1);
  const Tensor x = contiguous(reshape(logits, {-1, C}));  // [n, C]
  const Tensor t = contiguous(reshape(targets, {-1}));    // [n]
  Tensor losses = detail::empty_as(x, {x.size(0)});       // [n]
  Tensor lse = detail::empty_as(x, {x.size(0)});          // [n], kept for backward: softmax = exp(x - lse)
  // A GPU reports a bad target at its next copy to the host (Backend::cross_entropy_forward), with this message.
  const auto describe = [C, ignore_index](std::int64_t position, std::int64_t target) {
    return fmt::format(
        "cross_entropy: target {} at position {} is out of range for {} classes "
        "(valid: 0 to {}, or ignore_index {})",
        target, position, C, C - 1, ignore_index);
  };
  const std::int64_t bad = x.backend().cross_entropy_forward(losses.desc(), lse.desc(), x.desc(), t.desc(),
                                                             ignore_index, smoothing, describe);
  if (bad >= 0) throw IndexError(describe(bad, static_cast<std::int64_t>(t.at({bad}))));

  Tensor out;
  Tensor count;  // the mean's divisor, a device scalar: read back, it would make the host wait for a GPU (docs/09)
  if (reduction == Reduction::none) {
    out = detail::make_view(losses, targets.shape(), contiguous_strides(targets.shape()), 0);
  } else {
    if (reduction == Reduction::mean) {
      // EXERCISE 7.2 (continued)
      const Tensor ignored = scalar(static_cast<double>(ignore_index), {DType::int64, t.device()});
      count = sum(ne(t, ignored).to(x.dtype()));  // the targets that are not ignored; 0 gives NaN, as PyTorch
      // END EXERCISE
    }
    NoGradGuard no_grad;
    out = count.defined() ? sum(losses) / count : sum(losses);
  }
  record(Op::cross_entropy, out, {logits}, {x, t, lse, count},
         [per_row = reduction == Reduction::none, ignore_index, smoothing, shape = logits.shape()](
             const Tensor& g, const Tensor& x, const Tensor& t, const Tensor& lse, const Tensor& count) -> Gradients {
           // Each row's loss's gradient: g itself, or the summed loss's g (over count: the mean) shared by every row.
           const Tensor grad_rows = per_row ? contiguous(reshape(g, {-1}))
                                            : expand(reshape(count.defined() ? g / count : g, {1}), {x.size(0)});
           Tensor d = detail::empty_as(x, x.shape());  // [n, C]
           x.backend().cross_entropy_backward(d.desc(), x.desc(), lse.desc(), t.desc(), grad_rows.desc(), ignore_index,
                                              smoothing);
           return {reshape(d, shape)};
         });
  return out;
}

}  // namespace stepformer
