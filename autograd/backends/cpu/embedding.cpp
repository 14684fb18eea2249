// Row gather (embedding lookup) and its adjoint, row scatter-add; row writes (index_copy_).
#include <cstring>

#include "cpu_backend.h"
#include "strided.h"

namespace stepformer::cpu {

std::int64_t CpuBackend::gather_rows(const TensorDesc& out, const TensorDesc& table, const TensorDesc& ids,
                                     const DescribeBadIndex& /*reported by the op*/) {
  const std::int64_t n = ids.numel(), V = table.shape[0], D = table.shape[1];
  const std::int64_t* id = ptr<std::int64_t>(ids);
  for (std::int64_t i = 0; i < n; ++i)
    if (id[i] < 0 || id[i] >= V) return i;  // checked before any write: no partial output
  const std::size_t row_bytes = static_cast<std::size_t>(D) * element_size(table.dtype);
#pragma omp parallel for schedule(static) if (n * D >= kParallelGrain)
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(static_cast<char*>(out.data) + static_cast<std::size_t>(i) * row_bytes,
                static_cast<const char*>(table.data) + static_cast<std::size_t>(id[i]) * row_bytes, row_bytes);
  return -1;
}

void CpuBackend::scatter_add_rows(const TensorDesc& table_grad, const TensorDesc& grad, const TensorDesc& ids,
                                  std::int64_t skip_id) {
  const std::int64_t n = ids.numel(), D = table_grad.shape[1];
  const std::int64_t* id = ptr<std::int64_t>(ids);
  dispatch_floating(grad.dtype, "scatter_add_rows", [&](auto t) {
    using T = decltype(t);
    // Parallel over columns, serial over ids: repeated ids add up without races, in a fixed order.
#pragma omp parallel for schedule(static) if (n * D >= kParallelGrain)
    for (std::int64_t c = 0; c < D; ++c)
      for (std::int64_t i = 0; i < n; ++i)
        if (id[i] != skip_id) ptr<T>(table_grad)[id[i] * D + c] += ptr<T>(grad)[i * D + c];
  });
}

std::int64_t CpuBackend::write_rows(const TensorDesc& table, const TensorDesc& rows, const TensorDesc& ids,
                                    const DescribeBadIndex& /*reported by the op*/) {
  const std::int64_t n = ids.numel(), P = table.shape[0], N = table.shape[1], E = table.shape[2];
  const std::int64_t* id = ptr<std::int64_t>(ids);
  for (std::int64_t i = 0; i < n; ++i)
    if (id[i] < 0 || id[i] >= N) return i;  // checked before any write
  const std::size_t row_bytes = static_cast<std::size_t>(E) * element_size(table.dtype);
  // Parallel over the leading index p, in order over i within it: a repeated id keeps its last row.
#pragma omp parallel for schedule(static) if (P * n * E >= kParallelGrain)
  for (std::int64_t p = 0; p < P; ++p)
    for (std::int64_t i = 0; i < n; ++i)
      std::memcpy(static_cast<char*>(table.data) + static_cast<std::size_t>(p * N + id[i]) * row_bytes,
                  static_cast<const char*>(rows.data) + static_cast<std::size_t>(p * n + i) * row_bytes, row_bytes);
  return -1;
}

}  // namespace stepformer::cpu
