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

__device__ inline std::uint32_t bf16_pair(float low, float high) {
  return std::uint32_t{bfloat16(low).bits} | std::uint32_t{bfloat16(high).bits} << 16;
}

// Row r (0: g, 1: g + 8) of accumulators [D / 8][4] times `factor`, this lane's two columns of each 8, into `row`.
template <int D>
__device__ inline void store_row(bfloat16* row, const float (&acc)[D / 8][4], int r, float factor) {
  const int t = static_cast<int>(threadIdx.x) % 4;
  STEPFORMER_UNROLL
  for (int d = 0; d < D / 8; ++d) {
    row[8 * d + 2 * t] = bfloat16(acc[d][2 * r] * factor);
    row[8 * d + 2 * t + 1] = bfloat16(acc[d][2 * r + 1] * factor);
  }
}
// Every head starts on 16 bytes (the rows are D >= 16 bfloat16s): so do the 16-byte copies of stage_rows.
inline bool aligned16(const TensorDesc& t) {
  return reinterpret_cast<std::uintptr_t>(t.data) % 16 == 0 && t.strides[0] % 8 == 0 && t.strides[1] % 8 == 0;
}

}  // namespace stepformer::STEPFORMER_CUDA_NS::attention_mma
