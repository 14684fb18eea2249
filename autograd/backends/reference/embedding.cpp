// Row gather (the embedding lookup) and its adjoint, row scatter-add (the embedding's weight gradient).
#include "reference_backend.h"
#include "strided.h"

namespace stepformer::reference {

std::int64_t ReferenceBackend::gather_rows(const TensorDesc& out, const TensorDesc& table, const TensorDesc& ids,
                                           const DescribeBadIndex& /*reported by the op*/) {
  const std::int64_t n = ids.numel(), V = table.shape[0], D = table.shape[1];
  for (std::int64_t i = 0; i < n; ++i)  // every id is checked before anything is written
    if (flat<std::int64_t>(ids, i) < 0 || flat<std::int64_t>(ids, i) >= V) return i;
  dispatch_all(table.dtype, [&](auto t) {
    using T = decltype(t);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < D; ++j) flat<T>(out, i * D + j) = flat<T>(table, flat<std::int64_t>(ids, i) * D + j);
  });
  return -1;
}

void ReferenceBackend::scatter_add_rows(const TensorDesc& table_grad, const TensorDesc& grad, const TensorDesc& ids,
                                        std::int64_t skip_id) {
  const std::int64_t n = ids.numel(), D = table_grad.shape[1];
  dispatch_floating(grad.dtype, "scatter_add_rows", [&](auto t) {
    using T = decltype(t);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t id = flat<std::int64_t>(ids, i);
      if (id == skip_id) continue;
      for (std::int64_t j = 0; j < D; ++j) flat<T>(table_grad, id * D + j) += flat<T>(grad, i * D + j);
    }
  });
}

}  // namespace stepformer::reference
