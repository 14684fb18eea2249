// Row gather (embedding lookup) and its adjoint, row scatter-add; row writes (index_copy_).
//
// gather: the ids are checked by the kernel's block 0 (check_ids_in_block, checks.cuh), whose result the host reads
//   at its next copy from the device; until then a bad id's row reads as zeros. One thread per output element:
//   thread (i, c) of the flat grid copies table[ids[i], c]; a warp copies 32 consecutive columns of one row.
// write: the same check in block 0; thread (p, i, c) writes rows[p, i, c] to table[p, ids[i], c] unless a later
//   position holds the same id (the last row wins, as on the CPU, with no two threads writing one element) or the
//   id is bad. A decoding step writes one row a layer (its keys at the position kept on the device): n is 1 there,
//   and the scan for repeats is for correctness, not speed (n^2 comparisons).
// scatter-add: deterministic, and without the host. Repeated ids add into one row; atomicAdd would add them in
//   the order the threads arrive, which on a GPU changes from run to run in the last bits (a resumed training run
//   then differs from an uninterrupted one). So the positions are sorted by id, stably, on the device:
//   sort_positions_kernel gives each position its rank (the ids below its own, and its own id's earlier
//   positions), which is where it goes. Then one thread per (first position of an id, column) adds that id's
//   gradient rows in position order: the CPU's and the reference's order, so all three agree to the bit.
//   Counting ranks costs n^2 comparisons (4 million for the 2,048 ids of chapter 12's batch, spread over as many
//   threads); PyTorch's CUDA embedding backward sorts with a radix sort (n log n), which pays off for longer batches.
//   Sorting on the host instead costs two waits for the device a step (docs/09_cuda.md, "Where the host waits").
#include "checks.cuh"
#include "cuda_backend.h"
#include "device_utils.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

constexpr unsigned kThreads = 256;

template <class T>
__global__ void gather_rows_kernel(T* out, const T* table, const std::int64_t* ids, std::int64_t n, std::int64_t V,
                                   std::int64_t D, IdCheck check) {
  if (blockIdx.x == 0) check_ids_in_block(check);
  for (std::int64_t e = global_thread(); e < n * D; e += grid_threads()) {
    const std::int64_t id = ids[e / D];
    out[e] = id >= 0 && id < V ? table[id * D + e % D] : T(0);
  }
}

// order[rank of position i] = i, ranked by (id, position): a stable sort of the positions by id.
__global__ void sort_positions_kernel(std::int64_t* order, const std::int64_t* ids, std::int64_t n) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) {
    const std::int64_t id = ids[i];
    std::int64_t rank = 0;
    for (std::int64_t j = 0; j < n; ++j) rank += ids[j] < id || (ids[j] == id && j < i);
    order[rank] = i;
  }
}

// Thread (r, c) works only where sorted position r is its id's first: it adds column c of every row of that id.
// An id outside the table (which the forward's check reports) adds nothing.
template <class T>
__global__ void scatter_add_rows_kernel(T* table_grad, const T* grad, const std::int64_t* ids,
                                        const std::int64_t* order, std::int64_t n, std::int64_t V, std::int64_t D,
                                        std::int64_t skip_id) {
  for (std::int64_t e = global_thread(); e < n * D; e += grid_threads()) {
    const std::int64_t r = e / D, c = e % D, id = ids[order[r]];
    if (id == skip_id || id < 0 || id >= V || (r > 0 && ids[order[r - 1]] == id)) continue;
    T sum = table_grad[id * D + c];
    for (std::int64_t s = r; s < n && ids[order[s]] == id; ++s) sum += grad[order[s] * D + c];
    table_grad[id * D + c] = sum;
  }
}

template <class T>
__global__ void write_rows_kernel(T* table, const T* rows, const std::int64_t* ids, std::int64_t P, std::int64_t N,
                                  std::int64_t n, std::int64_t E, IdCheck check) {
  if (blockIdx.x == 0) check_ids_in_block(check);
  for (std::int64_t e = global_thread(); e < P * n * E; e += grid_threads()) {
    const std::int64_t p = e / (n * E), i = e / E % n, id = ids[i];
    bool last = id >= 0 && id < N;
    for (std::int64_t j = i + 1; j < n && last; ++j) last = ids[j] != id;
    if (last) table[(p * N + id) * E + e % E] = rows[e];
  }
}

}  // namespace

std::int64_t CudaBackend::gather_rows(const TensorDesc& out, const TensorDesc& table, const TensorDesc& ids,
                                      const DescribeBadIndex& describe) {
  const std::int64_t n = ids.numel(), V = table.shape[0], D = table.shape[1];
  const auto* id = static_cast<const std::int64_t*>(ids.data);
  if (n == 0) return -1;
  dispatch_floating(table.dtype, "gather_rows", [&](auto t) {
    using T = decltype(t);
    queue_index_check({id, n, V, false, 0, nullptr, nullptr, 0}, describe, [&](const IdCheck& check) {
      launch(gather_rows_kernel<T>, blocks_for(n * D, kThreads), kThreads, 0, static_cast<T*>(out.data),
             static_cast<const T*>(table.data), id, n, V, D, check);
    });
  });
  return -1;
}

void CudaBackend::scatter_add_rows(const TensorDesc& table_grad, const TensorDesc& grad, const TensorDesc& ids,
                                   std::int64_t skip_id) {
  const std::int64_t n = ids.numel(), V = table_grad.shape[0], D = table_grad.shape[1];
  if (n * D == 0) return;
  const auto* id = static_cast<const std::int64_t*>(ids.data);
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(std::int64_t);
  auto* order = static_cast<std::int64_t*>(allocate(bytes));
  launch(sort_positions_kernel, blocks_for(n, kThreads), kThreads, 0, order, id, n);
  dispatch_floating(grad.dtype, "scatter_add_rows", [&](auto t) {
    using T = decltype(t);
    launch(scatter_add_rows_kernel<T>, blocks_for(n * D, kThreads), kThreads, 0, static_cast<T*>(table_grad.data),
           static_cast<const T*>(grad.data), id, order, n, V, D, skip_id);
  });
  deallocate(order, bytes);  // the cache hands it out again only to work queued after these kernels
}

std::int64_t CudaBackend::write_rows(const TensorDesc& table, const TensorDesc& rows, const TensorDesc& ids,
                                     const DescribeBadIndex& describe) {
  const std::int64_t n = ids.numel(), P = table.shape[0], N = table.shape[1], E = table.shape[2];
  if (n == 0) return -1;
  const auto* id = static_cast<const std::int64_t*>(ids.data);
  dispatch_storage(table.dtype, [&](auto t) {
    using T = decltype(t);
    queue_index_check({id, n, N, false, 0, nullptr, nullptr, 0}, describe, [&](const IdCheck& check) {
      launch(write_rows_kernel<T>, blocks_for(P * n * E, kThreads), kThreads, 0, static_cast<T*>(table.data),
             static_cast<const T*>(rows.data), id, P, N, n, E, check);
    });
  });
  return -1;
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
