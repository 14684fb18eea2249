#pragma once
// What the tensor-core attention kernels share (attention_tensor_cores.cu, the forward;
// attention_tensor_cores_backward.cu, the backward): the block's shape, staging rows into padded tiles, and moving
// accumulators to and from bfloat16.
#include <cstdint>

#include "../attention_math.h"
#include "cuda_backend.h"
#include "device_utils.cuh"

namespace stepformer::STEPFORMER_CUDA_NS::attention_mma {

constexpr int kRows = 64, kKeys = 64, kThreads = 128;

// Rows [first, first + rows) of a contiguous [*, D] bfloat16 matrix into a tile of row stride D + 8; rows at or
// past `valid` are zeros.
template <int D>
__device__ inline void stage_rows(bfloat16* tile, const bfloat16* x, std::int64_t first, std::int64_t valid) {
  constexpr int kPieces = D / 8;  // 16 bytes each
  for (int e = static_cast<int>(threadIdx.x); e < kRows * kPieces; e += kThreads) {
    const int r = e / kPieces, c = e % kPieces * 8;
    Bytes16 w{};
    if (r < valid) w = *reinterpret_cast<const Bytes16*>(x + (first + r) * D + c);
    *reinterpret_cast<Bytes16*>(tile + r * (D + 8) + c) = w;
  }
}

// The same rows copied by cp.async (compat.cuh's AsyncCopies): the copies start here and land at a later wait, so
// the tile fills while the warps work on another; rows at or past `valid` are zero-filled without a read.
template <int D, class Copies>
__device__ inline void stage_rows_async(Copies& copies, bfloat16* tile, const bfloat16* x, std::int64_t first,
                                        std::int64_t valid) {
  constexpr int kPieces = D / 8;
  for (int e = static_cast<int>(threadIdx.x); e < kRows * kPieces; e += kThreads) {
    const int r = e / kPieces, c = e % kPieces * 8;
    copies.copy16(tile + r * (D + 8) + c, r < valid ? x + (first + r) * D + c : x, r < valid);
  }
}

// Two stages of two tiles of 64 rows (K and V for the forward and the dQ kernel, Q and dO for the dK/dV kernel),
// filled by cp.async one tile ahead of the warps. start(first) begins copying the tiles at row `first` into stage 0;
// at each step, next(first, stage) begins copying the tiles at first + 64 into the other stage (if any are before
// `end`) and returns once those at `first` have landed in `stage`, for every thread. The caller ends each step with
// a __syncthreads, after which the stage may be refilled.
template <int D>
struct TileStages {
  bfloat16* tiles[2];         // each [2 stages][64 rows][D + 8]
  const bfloat16* source[2];  // each contiguous [rows, D]
  std::int64_t rows, end;     // the sources' rows; where the walk ends (a multiple of 64 or `rows`)
  AsyncCopies<2 * 2 * kRows*(D / 8) / kThreads> copies;  // two stages of both tiles in flight at most

  __device__ __forceinline__ bfloat16* tile(int which, std::int64_t stage) {
    return tiles[which] + stage * kRows * (D + 8);
  }
  __device__ __forceinline__ void copy(std::int64_t first, std::int64_t stage) {
    STEPFORMER_UNROLL
    for (int which = 0; which < 2; ++which)
      stage_rows_async<D>(copies, tile(which, stage), source[which], first, rows - first);
  }
  __device__ __forceinline__ void start(std::int64_t first) {
    if (first < end) copy(first, 0);
    copies.commit();
  }
  __device__ __forceinline__ void next(std::int64_t first, std::int64_t stage) {
    if (first + kRows < end) copy(first + kRows, stage ^ 1);  // the other stage: every warp is done with it
    copies.commit();            // a group each step, empty after the last tile, so that wait<1> always means this one
    copies.template wait<1>();  // this thread's copies of the tiles at `first` have landed
    __syncthreads();            // and everyone's
  }
};

__device__ inline std::uint32_t bf16_pair(float low, float high) {
  return std::uint32_t{bfloat16(low).bits} | std::uint32_t{bfloat16(high).bits} << 16;
}

// A warp's 16 rows of accumulators [D / 8][4] (lane 4g + t: rows g and g + 8, columns 2t and 2t + 1 of every 8),
// rows g times `low` and rows g + 8 times `high`, rounded to bfloat16 into rows [first, first + 16) of a contiguous [*,
// D] matrix, those at or past `valid` left out. Written as they lie, each lane would store two values of two rows:
// 4-byte pieces of 32 rows a request. So the warp first writes them into `band`, 16 rows of a tile (row stride
// D + 8: the 8 lanes of one t write 8 different banks) that only this warp uses, and then copies whole rows out,
// 16 bytes a lane.
template <int D>
__device__ inline void store_rows(bfloat16* x, std::int64_t first, std::int64_t valid, bfloat16* band,
                                  const float (&acc)[D / 8][4], float low, float high) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp, g = lane / 4, t = lane % 4;
  STEPFORMER_UNROLL
  for (int d = 0; d < D / 8; ++d) {
    STEPFORMER_UNROLL
    for (int r = 0; r < 2; ++r) {
      bfloat16* row = band + (g + 8 * r) * (D + 8) + 8 * d + 2 * t;
      row[0] = bfloat16(acc[d][2 * r] * (r == 0 ? low : high));
      row[1] = bfloat16(acc[d][2 * r + 1] * (r == 0 ? low : high));
    }
  }
  __syncwarp();
  constexpr int kPieces = D / 8;  // 16 bytes each
  for (int e = lane; e < 16 * kPieces; e += kWarp) {
    const int r = e / kPieces, c = e % kPieces * 8;
    if (first + r < valid)
      *reinterpret_cast<Bytes16*>(x + (first + r) * D + c) = *reinterpret_cast<const Bytes16*>(band + r * (D + 8) + c);
  }
  __syncwarp();  // every lane has read the band before it is written again
}
// Every head starts on 16 bytes (the rows are D >= 16 bfloat16s): so do the 16-byte copies of stage_rows,
// stage_rows_async and store_rows.
inline bool aligned16(const TensorDesc& t) {
  return reinterpret_cast<std::uintptr_t>(t.data) % 16 == 0 && t.strides[0] % 8 == 0 && t.strides[1] % 8 == 0;
}

}  // namespace stepformer::STEPFORMER_CUDA_NS::attention_mma
