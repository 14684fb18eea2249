#pragma once
// What several kernels share: finding a strided element from a flat index, and sums/maxima across a warp
// and across a block.
#include <string>
#include "../dispatch.h"
#include "autograd/backend.h"

#include "compat.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

template <class T>
__device__ __forceinline__ T* at(const TensorDesc& d) {
  return static_cast<T*>(d.data);
}

// The memory offset (in elements) of the element whose row-major position in the first `ndim` dimensions
// of `shape` is `i`, through `stride`: divide by each size, multiply by each stride.
__device__ __forceinline__ std::int64_t unravel(std::int64_t i, int ndim, const std::int64_t* shape,
                                                const std::int64_t* stride) {
  std::int64_t off = 0;
  for (int dim = ndim - 1; dim >= 0; --dim) {
    off += (i % shape[dim]) * stride[dim];
    i /= shape[dim];
  }
  return off;
}

// The memory offset (in elements) in `d` of the element whose row-major position in `shape` is `i`.
// `shape` is the iteration shape (the output's); `d` has the same ndim, a stride of 0 where it broadcasts.
__device__ __forceinline__ std::int64_t offset_of(const TensorDesc& shape, const TensorDesc& d, std::int64_t i) {
  return unravel(i, shape.ndim, shape.shape, d.strides);
}

// The flat index of this thread in a 1-D grid, and the grid's total thread count (the grid stride).
__device__ __forceinline__ std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_threads() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

struct Sum {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct Max {  // NaN wins, as torch.max
  template <class T>
  __device__ T operator()(T a, T b) const {
    return (a != a || a > b) ? a : b;
  }
};

// Butterfly reduction over the 32 lanes of a warp: after log2(32) = 5 xor-shuffles every lane holds the
// result. All 32 lanes must take part (a partial warp passes an identity value from its idle lanes).
template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
  for (int delta = kWarp / 2; delta > 0; delta /= 2) v = op(v, __shfl_xor_sync(kFullMask, v, delta));
  return v;
}

// Reduction over a whole block (blockDim.x a multiple of 32, at most 1024): each warp reduces its lanes,
// warp leaders put their results in shared memory, warp 0 reduces those. Every thread gets the result.
// Every thread of the block must call it (it contains __syncthreads).
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity) {
  // EXERCISE 9.3: warp_reduce, warp leaders to partial[32], barrier, warp 0 reduces; 3 barriers at most
  __shared__ T partial[kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_reduce(v, op);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / kWarp) ? partial[lane] : identity;
    v = warp_reduce(v, op);
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  v = partial[0];
  __syncthreads();  // everyone has read partial[0] before a next call overwrites it
  return v;
  // END EXERCISE
}

}  // namespace stepformer::STEPFORMER_CUDA_NS

namespace stepformer::STEPFORMER_CUDA_NS {

// Row kernels (softmax, layer_norm, cross-entropy) give each row to one warp: blocks of 32 x 4 threads,
// threadIdx.y picks the warp's row, its 32 lanes stride along the row, warp_reduce combines them.
// Rows past the grid are taken by a grid stride; a warp past the last row returns as a whole.
constexpr unsigned kRowsPerBlock = 4;

inline dim3 row_grid(std::int64_t rows) { return dim3(blocks_for(rows, kRowsPerBlock, 65535)); }
inline dim3 row_block() { return dim3(kWarp, kRowsPerBlock); }

__device__ __forceinline__ std::int64_t first_row() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
}
__device__ __forceinline__ std::int64_t row_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.y; }

}  // namespace stepformer::STEPFORMER_CUDA_NS
