#pragma once
// How the bfloat16 GEMMs that copy with cp.async (gemm_pipelined.cu: v5; gemm_wgmma.cu: v6) bring a step of k of
// an operand into shared memory: 128 rows (m of a, n of b) by 32 of k, in pieces of 8 values (16 bytes). A piece
// runs along k (an operand contiguous along k: a row-major a, b of x @ W^T) or along the rows (an operand contiguous
// along its rows: a row-major b, the gradients' transposed operands), as the operand lies in global memory, so one
// cp.async moves it as it is. Where a piece has to be staged one value at a time, the same layout holds it. Where
// the pieces go in shared memory is the kernel's choice (its Layout).
#include <type_traits>

#include "gemm_problem.cuh"

namespace stepformer::STEPFORMER_CUDA_NS::staging {

constexpr int kTile = kPipelinedTile, kStepK = 32, kThreads = 128, kChunks = 8;  // 8 values in a 16-byte copy
constexpr int kCopiesPerStep = 2 * kTile * kStepK / kChunks / kThreads;          // per thread, both operands: 8
enum Staging : int { kAsyncAlongK, kAsyncAlongRows, kScalarAlongK, kScalarAlongRows };

__host__ __device__ __forceinline__ bool along_k(int staging) {
  return staging == kAsyncAlongK || staging == kScalarAlongK;
}

// One operand as a kernel stages it: x[r, k] at x + r * ld_r + k * ld_k, batch offsets aside.
struct Operand {
  std::int64_t rows, ld_r, ld_k;
  int staging;
};

// How an operand [rows along r, K along k] with the given strides (and batch strides) is staged: a 16-byte copy
// needs 8 whole values at a 16-byte aligned address (K a multiple of 8 along k, the rows along rows, aligned strides
// and data); any other view goes one value at a time with bounds checks.
inline Operand operand(const TensorDesc& d, std::int64_t rows, std::int64_t ld_r, std::int64_t ld_k, std::int64_t K) {
  const bool aligned = batches_16_byte_aligned(d);
  int staging = ld_k == 1 ? kScalarAlongK : kScalarAlongRows;
  if (aligned && ld_k == 1 && ld_r % kChunks == 0 && K % kChunks == 0) staging = kAsyncAlongK;
  if (aligned && ld_r == 1 && ld_k % kChunks == 0 && rows % kChunks == 0) staging = kAsyncAlongRows;
  return {rows, ld_r, ld_k, staging};
}

// Calls f(std::bool_constant<a staged along k>{}, std::bool_constant<b staged along k>{}): the two layouts as
// compile-time values, so that each pair is a kernel of its own and the inner loop does not branch on them.
template <class F>
void with_layouts(const Operand& a, const Operand& b, F f) {
  const bool ak = along_k(a.staging), bk = along_k(b.staging);
  if (ak && bk) return f(std::true_type{}, std::true_type{});
  if (ak) return f(std::true_type{}, std::false_type{});
  if (bk) return f(std::false_type{}, std::true_type{});
  f(std::false_type{}, std::false_type{});
}

// This thread's share of the step at k0 of one operand (rows from r0) into `tile`: 4 pieces of 8 values, each one
// 16-byte cp.async, or 8 loads with bounds checks and one 16-byte store. layout(r, k, along_k) is where in `tile`
// the piece of (r, k) .. (r, k + 7) (along k) or (r, k) .. (r + 7, k) (along rows) goes, its 8 values contiguous.
template <class Copies, class Layout>
__device__ __forceinline__ void stage(const bfloat16* x, const Operand& o, std::int64_t r0, std::int64_t k0,
                                      std::int64_t K, bfloat16* tile, Copies& copies, Layout layout) {
  struct alignas(16) Words4 {
    std::uint32_t w[4];
  };
  const bool k_major = along_k(o.staging);
  STEPFORMER_UNROLL
  for (int q = 0; q < kTile * kStepK / kChunks / kThreads; ++q) {
    const int c = static_cast<int>(threadIdx.x) + kThreads * q;
    // A warp's 32 pieces: along k, 8 rows by the step's 32 of k; along rows, 8 of k by 32 rows. Either way each
    // row of memory it reads is 64 contiguous bytes (2 sectors), and the 8 lanes of a phase of a 16-byte store
    // take 8 neighbouring rows (along k) or values of k (along rows), which both Layouts put in 8 bank quads.
    const int r = k_major ? c / kWarp * 8 + c % 8 : c / 8 % (kTile / kChunks) * kChunks;
    const int k = k_major ? c % kWarp / 8 * kChunks : c / (kTile / kChunks * 8) * 8 + c % 8;
    bfloat16* dst = tile + layout(r, k, k_major);
    const std::int64_t row = r0 + r, kk = k0 + k;
    if (o.staging == kAsyncAlongK || o.staging == kAsyncAlongRows) {
      const bool inside = row < o.rows && kk < K;
      copies.copy16(dst, inside ? x + row * o.ld_r + kk * o.ld_k : x, inside);
      continue;
    }
    Words4 piece{};  // value e in the low (even e) or high half of word e / 2
    STEPFORMER_UNROLL
    for (int e = 0; e < kChunks; ++e) {
      const std::int64_t re = k_major ? row : row + e, ke = k_major ? kk + e : kk;
      if (re < o.rows && ke < K) piece.w[e / 2] |= std::uint32_t{x[re * o.ld_r + ke * o.ld_k].bits} << 16 * (e % 2);
    }
    *reinterpret_cast<Words4*>(dst) = piece;
  }
}

}  // namespace stepformer::STEPFORMER_CUDA_NS::staging
