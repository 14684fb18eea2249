// Row gather (the embedding lookup) and its adjoint, row scatter-add (the embedding's weight gradient); row writes
// (index_copy_: a token's keys written into a cache at its position).
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

std::int64_t ReferenceBackend::write_rows(const TensorDesc& table, const TensorDesc& rows, const TensorDesc& ids,
                                          const DescribeBadIndex& /*reported by the op*/) {
  const std::int64_t n = ids.numel(), P = table.shape[0], N = table.shape[1], E = table.shape[2];
  for (std::int64_t i = 0; i < n; ++i)  // every id is checked before anything is written
    if (flat<std::int64_t>(ids, i) < 0 || flat<std::int64_t>(ids, i) >= N) return i;
  dispatch_storage(table.dtype, [&](auto t) {
    using T = decltype(t);
    for (std::int64_t p = 0; p < P; ++p)
      for (std::int64_t i = 0; i < n; ++i)  // in order: a repeated id keeps its last row
        for (std::int64_t j = 0; j < E; ++j)
          flat<T>(table, (p * N + flat<std::int64_t>(ids, i)) * E + j) = flat<T>(rows, (p * n + i) * E + j);
  });
  return -1;
}

}  // namespace stepformer::reference
