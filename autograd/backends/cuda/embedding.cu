// Row gather (embedding lookup) and its adjoint, row scatter-add.
//
// gather: the ids are checked first by find_bad_ids_kernel (one thread per id, atomicMin keeps the first
//   bad position), so a bad id leaves no partial output. Then one thread per output element: thread
//   (i, c) of the flat grid copies table[ids[i], c]; a warp copies 32 consecutive columns of one row.
// scatter-add: deterministic. Repeated ids add into one row; atomicAdd would add them in the order the
//   threads arrive, which on a GPU changes from run to run in the last bits (a resumed training run then
//   differs from an uninterrupted one). So the host sorts the positions by id, stably
//   (the ids are few: one per token of the batch), and one thread per (distinct id, column) adds that id's
//   gradient rows in position order — the CPU's and the reference's order, so all three agree to the bit.
//   PyTorch's CUDA embedding backward also sorts, on the device.
#include <algorithm>
#include <numeric>
#include <vector>

#include "cuda_backend.h"
#include "device_utils.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

__global__ void find_bad_ids_kernel(const std::int64_t* ids, std::int64_t n, std::int64_t limit, bool has_allowed,
                                    std::int64_t allowed, long long* first_bad) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads())
    if ((ids[i] < 0 || ids[i] >= limit) && !(has_allowed && ids[i] == allowed))
      atomicMin(first_bad, static_cast<long long>(i));
}

namespace {

constexpr unsigned kThreads = 256;

template <class T>
__global__ void gather_rows_kernel(T* out, const T* table, const std::int64_t* ids, std::int64_t n, std::int64_t D) {
  for (std::int64_t e = global_thread(); e < n * D; e += grid_threads()) out[e] = table[ids[e / D] * D + e % D];
}

// rows[0, n): positions sorted by id; rows[n, n + u]: where each distinct id's positions start (u + 1
// values); rows[n + u + 1, n + 2u + 1): the distinct ids.
template <class T>
__global__ void scatter_add_rows_kernel(T* table_grad, const T* grad, const std::int64_t* rows, std::int64_t n,
                                        std::int64_t u, std::int64_t D) {
  const std::int64_t* starts = rows + n;
  const std::int64_t* distinct = starts + u + 1;
  for (std::int64_t e = global_thread(); e < u * D; e += grid_threads()) {
    const std::int64_t s = e / D, c = e % D;
    T sum = table_grad[distinct[s] * D + c];
    for (std::int64_t r = starts[s]; r < starts[s + 1]; ++r) sum += grad[rows[r] * D + c];
    table_grad[distinct[s] * D + c] = sum;
  }
}

}  // namespace

std::int64_t CudaBackend::gather_rows(const TensorDesc& out, const TensorDesc& table, const TensorDesc& ids) {
  const std::int64_t n = ids.numel(), V = table.shape[0], D = table.shape[1];
  if (n == 0) return -1;
  const auto* id = static_cast<const std::int64_t*>(ids.data);
  launch(find_bad_ids_kernel, blocks_for(n, kThreads), kThreads, 0, id, n, V, false, std::int64_t{0},
         first_bad_index_slot());
  const std::int64_t bad = read_first_bad_index();
  if (bad >= 0 || D == 0) return bad;
  dispatch_floating(table.dtype, "gather_rows", [&](auto t) {
    using T = decltype(t);
    launch(gather_rows_kernel<T>, blocks_for(n * D, kThreads), kThreads, 0, static_cast<T*>(out.data),
           static_cast<const T*>(table.data), id, n, D);
  });
  return -1;
}

void CudaBackend::scatter_add_rows(const TensorDesc& table_grad, const TensorDesc& grad, const TensorDesc& ids,
                                   std::int64_t skip_id) {
  const std::int64_t n = ids.numel(), D = table_grad.shape[1];
  if (n * D == 0) return;
  std::vector<std::int64_t> id(static_cast<std::size_t>(n));
  copy_to_host(id.data(), ids.data, id.size() * sizeof(std::int64_t));
  std::vector<std::int64_t> rows(id.size());
  std::iota(rows.begin(), rows.end(), 0);
  std::stable_sort(rows.begin(), rows.end(), [&](std::int64_t a, std::int64_t b) { return id[a] < id[b]; });
  rows.erase(std::remove_if(rows.begin(), rows.end(), [&](std::int64_t r) { return id[r] == skip_id; }), rows.end());
  const std::int64_t kept = static_cast<std::int64_t>(rows.size());
  std::vector<std::int64_t> starts, distinct;
  for (std::int64_t r = 0; r < kept; ++r)
    if (r == 0 || id[rows[r]] != id[rows[r - 1]]) {
      starts.push_back(r);
      distinct.push_back(id[rows[r]]);
    }
  starts.push_back(kept);
  const std::int64_t u = static_cast<std::int64_t>(distinct.size());
  if (u == 0) return;
  rows.insert(rows.end(), starts.begin(), starts.end());
  rows.insert(rows.end(), distinct.begin(), distinct.end());
  const std::size_t bytes = rows.size() * sizeof(std::int64_t);
  void* device_rows = allocate(bytes);
  copy_from_host(device_rows, rows.data(), bytes);
  dispatch_floating(grad.dtype, "scatter_add_rows", [&](auto t) {
    using T = decltype(t);
    launch(scatter_add_rows_kernel<T>, blocks_for(u * D, kThreads), kThreads, 0, static_cast<T*>(table_grad.data),
           static_cast<const T*>(grad.data), static_cast<const std::int64_t*>(device_rows), kept, u, D);
  });
  deallocate(device_rows, bytes);  // the cache hands it out again only to work queued after this kernel
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
