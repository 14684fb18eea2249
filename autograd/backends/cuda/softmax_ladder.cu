// The softmax ladder (ladders.h): three ways to map softmax over rows of C elements onto threads.
// Each version against the CPU: `build/cudasim-check/bin/cuda_tests "cuda: every version of the softmax, row-sum
// and transpose ladders matches the CPU"`; what each fix buys, counted: `build/cudasim-check/bin/ladder_bench`.
#include <string>

#include "cuda_backend.h"
#include "device_utils.cuh"
#include "ladders.h"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

constexpr int kV2Threads = 128;

// v1, one thread per row: the loop a CPU programmer writes first, three passes (max, sum of exp, write).
// Right, but the lanes of a warp read 32 different rows, C elements apart: every warp-wide load touches one
// sector per lane (up to 32) where 4 would do, and a long row is walked by one thread alone.
template <class T>
__global__ void softmax_v1(T* out, const T* in, std::int64_t rows, std::int64_t C) {
  for (std::int64_t r = global_thread(); r < rows; r += grid_threads()) {
    const T* x = in + r * C;
    T* y = out + r * C;
    T mx = x[0];
    for (std::int64_t c = 1; c < C; ++c) mx = Max{}(mx, x[c]);
    T total = 0;
    for (std::int64_t c = 0; c < C; ++c) total += exp_(x[c] - mx);
    for (std::int64_t c = 0; c < C; ++c) y[c] = exp_(x[c] - mx) / total;
  }
}

// A block-wide reduction by a tree in shared memory: each step halves the active threads (sequential
// addressing: thread t adds t + s, so a warp touches 32 neighbouring words, no bank conflict), with a
// barrier per step: log2(kV2Threads) = 7 of them, plus one so that the result is read before reuse.
template <class T, class Op>
__device__ T tree_reduce(T* scratch, T v, Op op) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int s = kV2Threads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) scratch[threadIdx.x] = op(scratch[threadIdx.x], scratch[threadIdx.x + s]);
    __syncthreads();
  }
  const T result = scratch[0];
  __syncthreads();
  return result;
}

// v2, one block of 128 threads per row: thread t takes elements t, t + 128, ..., so a warp reads 32
// neighbours: coalesced (4 sectors per float request). Fixes v1's scattered loads and spreads a row over 128
// threads; the price is the combining: the max and the sum each cross the block through shared memory, 8
// barriers apiece, and on rows shorter than 128 most threads idle.
template <class T>
__global__ void softmax_v2(T* out, const T* in, std::int64_t rows, std::int64_t C) {
  __shared__ T scratch[kV2Threads];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = in + r * C;
    T* y = out + r * C;
    T mx = x[0];
    for (std::int64_t c = threadIdx.x; c < C; c += kV2Threads) mx = Max{}(mx, x[c]);
    mx = tree_reduce(scratch, mx, Max{});
    T total = 0;
    for (std::int64_t c = threadIdx.x; c < C; c += kV2Threads) total += exp_(x[c] - mx);
    total = tree_reduce(scratch, total, Sum{});
    for (std::int64_t c = threadIdx.x; c < C; c += kV2Threads) y[c] = exp_(x[c] - mx) / total;
  }
}

}  // namespace

// v3 is softmax.cu's kernel: one warp per row, four rows per block. The lanes still read 32 neighbours
// (coalesced, as v2), and the max and the sum are combined by five register shuffles (warp_reduce): no shared
// memory and no barrier at all, and a block serves four rows instead of idling on one short row.
void softmax_version(int version, const TensorDesc& out, const TensorDesc& in) {
  const std::int64_t C = in.ndim ? in.shape[in.ndim - 1] : 1;
  const std::int64_t rows = C ? in.numel() / C : 0;
  if (version < 1 || version > kSoftmaxVersions)
    throw ValueError("softmax_version: version " + std::to_string(version) + " is not 1, 2 or 3");
  if (rows == 0) return;
  if (version == 3) return backend().softmax_forward(out, in, false);
  dispatch_floating(in.dtype, "softmax_version", [&](auto t) {
    using T = decltype(t);
    T* o = static_cast<T*>(out.data);
    const T* x = static_cast<const T*>(in.data);
    if (version == 1)
      launch(softmax_v1<T>, blocks_for(rows, 128), 128u, 0, o, x, rows, C);
    else
      launch(softmax_v2<T>, blocks_for(rows, 1, 65535), static_cast<unsigned>(kV2Threads), 0, o, x, rows, C);
  });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
