// The reduction ladder (ladders.h): four ways to sum each row of a [rows, C] matrix, after Mark Harris,
// "Optimizing Parallel Reduction in CUDA" (NVIDIA, 2007), whose steps these follow, and the warp shuffles
// that came after it. Sums accumulate in T (float or double), as a GPU kernel would.
// Each version against the CPU: `build/cudasim-check/bin/cuda_tests "cuda: every version of the softmax, row-sum
// and transpose ladders matches the CPU"`; what each fix buys, counted: `build/cudasim-check/bin/ladder_bench`.
#include <string>

#include "cuda_backend.h"
#include "device_utils.cuh"
#include "ladders.h"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

constexpr int kThreads = 256;

// v1, one thread per row, adding its elements one after another. The lanes of a warp read 32 rows C
// elements apart: one sector per lane per load (32 where 4 would do), and each row is as slow as C additions.
template <class T>
__global__ void row_sum_v1(T* out, const T* in, std::int64_t rows, std::int64_t C) {
  for (std::int64_t r = global_thread(); r < rows; r += grid_threads()) {
    T acc = 0;
    for (std::int64_t c = 0; c < C; ++c) acc += in[r * C + c];
    out[r] = acc;
  }
}

// Each thread's partial sum of its strided share of row r: thread t adds elements t, t + 256, ..., so a
// warp's loads are 32 neighbours (coalesced). Shared by v2, v3 and v4, which differ only in the combining.
template <class T>
__device__ T strided_partial(const T* in, std::int64_t r, std::int64_t C) {
  T acc = 0;
  for (std::int64_t c = threadIdx.x; c < C; c += kThreads) acc += in[r * C + c];
  return acc;
}

// v2, one block per row, partials combined by a tree in shared memory with interleaved addressing (Harris's
// second kernel): at step s, thread t adds word 2 s t + s into word 2 s t. Fixes v1's scattered loads, but the
// words a warp touches are 2 s apart, so they pile into few of the 32 banks: bank conflicts at every step
// from s = 1 on, and one barrier per step (8 for 256 threads).
template <class T>
__global__ void row_sum_v2(T* out, const T* in, std::int64_t rows, std::int64_t C) {
  __shared__ T partial[kThreads];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    partial[threadIdx.x] = strided_partial(in, r, C);
    __syncthreads();
    for (int s = 1; s < kThreads; s *= 2) {
      const int i = 2 * s * static_cast<int>(threadIdx.x);
      if (i < kThreads) partial[i] += partial[i + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[r] = partial[0];
    __syncthreads();  // partial[0] is read before the next row overwrites it
  }
}

// v3, sequential addressing (Harris's third): at step s, thread t < s adds word t + s into word t. A warp now
// touches 32 neighbouring words, one per bank: the bank conflicts of v2 are gone. Still a barrier per step,
// and half the threads idle after the first.
template <class T>
__global__ void row_sum_v3(T* out, const T* in, std::int64_t rows, std::int64_t C) {
  __shared__ T partial[kThreads];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    partial[threadIdx.x] = strided_partial(in, r, C);
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s /= 2) {
      if (static_cast<int>(threadIdx.x) < s) partial[threadIdx.x] += partial[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[r] = partial[0];
    __syncthreads();
  }
}

// v4, warp shuffles first (block_reduce, the production reduction of reduce.cu): each warp sums its 32
// lanes in registers by five __shfl_xor_sync, then only the 8 warp sums go through shared memory. Fixes v3's
// barrier per step: 3 barriers per row instead of 9, and 8 shared stores instead of 256 per row.
template <class T>
__global__ void row_sum_v4(T* out, const T* in, std::int64_t rows, std::int64_t C) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T total = block_reduce(strided_partial(in, r, C), Sum{}, T(0));
    if (threadIdx.x == 0) out[r] = total;
  }
}

}  // namespace

void row_sum_version(int version, const TensorDesc& out, const TensorDesc& in) {
  const std::int64_t C = in.ndim ? in.shape[in.ndim - 1] : 1;
  const std::int64_t rows = C ? in.numel() / C : 0;
  if (version < 1 || version > kRowSumVersions)
    throw ValueError("row_sum_version: version " + std::to_string(version) + " is not 1, 2, 3 or 4");
  if (rows == 0) return;
  dispatch_floating(in.dtype, "row_sum_version", [&](auto t) {
    using T = decltype(t);
    T* o = static_cast<T*>(out.data);
    const T* x = static_cast<const T*>(in.data);
    const unsigned blocks = blocks_for(rows, 1, 65535), threads = kThreads;
    switch (version) {
      case 1: launch(row_sum_v1<T>, blocks_for(rows, 128), 128u, 0, o, x, rows, C); break;
      case 2: launch(row_sum_v2<T>, blocks, threads, 0, o, x, rows, C); break;
      case 3: launch(row_sum_v3<T>, blocks, threads, 0, o, x, rows, C); break;
      default: launch(row_sum_v4<T>, blocks, threads, 0, o, x, rows, C); break;
    }
  });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
