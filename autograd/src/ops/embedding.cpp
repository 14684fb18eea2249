// Embedding lookup: out[..., :] = weight[ids[...], :]. The backward scatter-adds the gradient rows
// back into a zero table, so an id that appears twice receives the sum of both rows' gradients.
#include "common.h"

namespace stepformer {

Tensor embedding(const Tensor& weight, const Tensor& ids, std::optional<std::int64_t> padding_idx) {
  detail::check_operands("embedding", {&weight, &ids}, /*same_dtype=*/false);
  detail::check_full_precision("embedding", weight);
  detail::check_dtype("embedding", ids, DType::int64, "ids");
  if (weight.dim() != 2)
    throw ShapeError(fmt::format("embedding: weight must be [V, D], got {}", to_string(weight.shape())));
  const std::int64_t V = weight.size(0), D = weight.size(1);
  std::int64_t skip = -1;  // ids are never negative, so -1 skips nothing
  if (padding_idx) {
    skip = *padding_idx < 0 ? *padding_idx + V : *padding_idx;
    if (skip < 0 || skip >= V)
      throw IndexError(
          fmt::format("embedding: padding_idx {} is out of range for a vocabulary of {} ids", *padding_idx, V));
  }
  const Tensor flat_ids = reshape(ids, {-1});                   // [n]
  const Tensor table = contiguous(weight);                      // [V, D]
  Tensor out = detail::empty_as(table, {flat_ids.numel(), D});  // [n, D]
  // A GPU reports a bad id at its next copy to the host (Backend::gather_rows), with this message.
  const auto describe = [shape = ids.shape(), V](std::int64_t position, std::int64_t id) {
    Shape where_in_ids(shape.size());
    for (std::int64_t r = position, d = static_cast<std::int64_t>(shape.size()) - 1; d >= 0; --d) {
      where_in_ids[static_cast<std::size_t>(d)] = r % shape[static_cast<std::size_t>(d)];
      r /= shape[static_cast<std::size_t>(d)];
    }
    return fmt::format(
        "embedding: id {} at position {} of ids {} is out of range for a vocabulary of {} ids "
        "(valid: 0 to {})",
        id, to_string(where_in_ids), to_string(shape), V, V - 1);
  };
  const std::int64_t bad = table.backend().gather_rows(out.desc(), table.desc(), contiguous(flat_ids).desc(), describe);
  if (bad >= 0) throw IndexError(describe(bad, static_cast<std::int64_t>(flat_ids.at({bad}))));
  Shape shape = ids.shape();
  shape.push_back(D);
  out = detail::make_view(out, shape, contiguous_strides(shape), 0);  // [..., D]
  record(Op::embedding, out, {table}, {contiguous(flat_ids)},
         [V, D, skip](const Tensor& g, const Tensor& saved_ids) -> Gradients {
           Tensor grad = zeros({V, D}, {g.dtype(), g.device(), false});
           const Tensor rows = contiguous(reshape(g, {-1, D}));  // [n, D]
           g.backend().scatter_add_rows(grad.desc(), rows.desc(), saved_ids.desc(), skip);
           return {grad};
         });
  return out;
}

}  // namespace stepformer
