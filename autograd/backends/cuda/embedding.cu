// Row gather (embedding lookup) and its adjoint, row scatter-add.
//
// gather: the ids are checked first by find_bad_ids_kernel (one thread per id, atomicMin keeps the first
//   bad position), so a bad id leaves no partial output. Then one thread per output element: thread
//   (i, c) of the flat grid copies table[ids[i], c]; a warp copies 32 consecutive columns of one row.
// scatter-add: one thread per element of grad; thread (i, c) does atomicAdd(&table_grad[ids[i], c], ...).
//   Repeated ids make different threads add into the same address: the atomic makes each add whole.
//   The order of those adds is the scheduler's, so on a GPU float sums may differ run to run in the last
//   bit (cuda-sim runs threads in a fixed order). PyTorch's embedding backward sorts the ids instead.
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

template <class T>
__global__ void scatter_add_rows_kernel(T* table_grad, const T* grad, const std::int64_t* ids, std::int64_t n,
                                        std::int64_t D, std::int64_t skip_id) {
  for (std::int64_t e = global_thread(); e < n * D; e += grid_threads()) {
    const std::int64_t id = ids[e / D];
    if (id != skip_id) atomicAdd(&table_grad[id * D + e % D], grad[e]);
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
  dispatch_floating(grad.dtype, "scatter_add_rows", [&](auto t) {
    using T = decltype(t);
    launch(scatter_add_rows_kernel<T>, blocks_for(n * D, kThreads), kThreads, 0, static_cast<T*>(table_grad.data),
           static_cast<const T*>(grad.data), static_cast<const std::int64_t*>(ids.data), n, D, skip_id);
  });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
