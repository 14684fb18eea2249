// GEMM v4, on the tensor cores, the fourth rung of the GEMM ladder (gemm_ladder.cu): c = alpha a b + beta c with
// bfloat16 a and b, float32 sums, a float32 or bfloat16 c (the products of autocast's matmuls; gemm.cu picks it
// on an A100 or newer, and on cuda-sim, which emulates mma.sync). Run it alone with `build/cudasim-check/bin/
// cuda_tests "cuda: GEMM: every version of the ladder matches the CPU"` (its v4 sections).
//
// The block's 128 x 128 tile of c is split among 8 warps, each owning 64 x 32 of it as 4 x 4 fragments of
// 16 x 8 in registers. Per step along K the block stages 32 of k of both operands in shared memory as pairs
// of k side by side (one 32-bit word holds x[k] and x[k + 1], the unit of the fragments), and each warp
// issues 16 mma.sync per 16 of k: 4096 multiply-adds per instruction where v3's FMA does 1. A row of a tile
// is padded from 16 words to 20, so the 32 lanes of a fragment load (8 rows, 4 words each) hit 32 banks.
//
// Staging: each thread stages 8 words of each operand per step, held in registers while the warps multiply
// the step before (the next step's loads are in flight during the mma.sync). How it reads them depends on
// the operand's layout, decided once per launch on the host (Staging):
// - contiguous along k, 16-byte aligned, K a multiple of 8 (a row-major a; b of x @ W^T): two 16-byte loads
//   of 8 k each, stored as they are (4 pairs) with one 16-byte store;
// - contiguous along its rows (m of a, n of b; a row-major b): 16-byte loads of 8 rows at k and at k + 1,
//   interleaved into 8 pairs;
// - otherwise one element at a time, with bounds checks (odd K, odd strides, unaligned views).
// Not here yet (the next rungs, as in CUTLASS): ldmatrix, cp.async into several stages, Hopper's wgmma.
#include <algorithm>
#include <string>

#include "gemm_problem.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

constexpr int kTile = 128, kStepK = 32, kPairs = kStepK / 2, kRowWords = kPairs + 4, kThreads = 256;
enum Staging : int { kScalarAlongK, kScalarAlongRows, kVectorAlongK, kVectorAlongRows };

struct alignas(16) Words4 {
  std::uint32_t w[4];
};

// One operand as the kernel stages it: x[r, k] at x + r * ld_r + k * ld_k, batch offsets aside.
struct Operand {
  std::int64_t rows, ld_r, ld_k;
  int staging;
};

// {x[r, k], x[r, k + 1]} as one word, the lower k in the low half; zero past the matrix's edges.
__device__ __forceinline__ std::uint32_t pair_at(const bfloat16* x, const Operand& o, std::int64_t r, std::int64_t k,
                                                 std::int64_t K) {
  if (r >= o.rows || k >= K) return 0;
  const std::uint32_t low = x[r * o.ld_r + k * o.ld_k].bits;
  const std::uint32_t high = k + 1 < K ? x[r * o.ld_r + (k + 1) * o.ld_k].bits : 0u;
  return low | high << 16;
}

// Where word q (< 8) of this thread's share of a step goes in the tile: row r, pair j.
__device__ __forceinline__ void slot(int staging, int q, int& r, int& j) {
  const int tid = static_cast<int>(threadIdx.x);
  switch (staging) {
    case kVectorAlongK: {  // 4 words of one row per 16-byte load; a warp reads 8 rows x 64 bytes
      const int piece = tid + kThreads * (q / 4);
      r = piece / 4, j = piece % 4 * 4 + q % 4;
      return;
    }
    case kVectorAlongRows:  // 8 rows of one pair; lanes l and l + 16 read adjacent 16 bytes
      r = tid / kPairs * 8 + q, j = tid % kPairs;
      return;
    case kScalarAlongK: {
      const int e = tid + kThreads * q;
      r = e / kPairs, j = e % kPairs;
      return;
    }
    default: {
      const int e = tid + kThreads * q;
      r = e % kTile, j = e / kTile;
    }
  }
}

// This thread's 8 words of the step at k0, rows from r0.
__device__ __forceinline__ void load_step(const bfloat16* x, const Operand& o, std::int64_t r0, std::int64_t k0,
                                          std::int64_t K, std::uint32_t (&w)[8]) {
  int r, j;
  if (o.staging == kVectorAlongK) {
    for (int h = 0; h < 2; ++h) {
      slot(o.staging, 4 * h, r, j);
      Words4 v{};
      if (r0 + r < o.rows && k0 + 2 * j < K) v = *reinterpret_cast<const Words4*>(x + (r0 + r) * o.ld_r + k0 + 2 * j);
      for (int i = 0; i < 4; ++i) w[4 * h + i] = v.w[i];
    }
  } else if (o.staging == kVectorAlongRows) {
    slot(o.staging, 0, r, j);
    Words4 lo{}, hi{};
    if (r0 + r < o.rows && k0 + 2 * j < K) {
      lo = *reinterpret_cast<const Words4*>(x + (k0 + 2 * j) * o.ld_k + r0 + r);
      hi = *reinterpret_cast<const Words4*>(x + (k0 + 2 * j + 1) * o.ld_k + r0 + r);
    }
    for (int i = 0; i < 8; ++i) {
      const int shift = 16 * (i % 2);
      w[i] = (lo.w[i / 2] >> shift & 0xFFFFu) | (hi.w[i / 2] >> shift & 0xFFFFu) << 16;
    }
  } else {
    for (int q = 0; q < 8; ++q) {
      slot(o.staging, q, r, j);
      w[q] = pair_at(x, o, r0 + r, k0 + 2 * j, K);
    }
  }
}

__device__ __forceinline__ void store_step(std::uint32_t (*tile)[kRowWords], int staging, const std::uint32_t (&w)[8]) {
  int r, j;
  if (staging == kVectorAlongK) {
    for (int h = 0; h < 2; ++h) {
      slot(staging, 4 * h, r, j);
      *reinterpret_cast<Words4*>(&tile[r][j]) = Words4{{w[4 * h], w[4 * h + 1], w[4 * h + 2], w[4 * h + 3]}};
    }
    return;
  }
  for (int q = 0; q < 8; ++q) {
    slot(staging, q, r, j);
    tile[r][j] = w[q];
  }
}

template <class TC>
__global__ void __launch_bounds__(kThreads) gemm_v4(Problem p, Operand oa, Operand ob, float alpha, float beta) {
  alignas(16) __shared__ std::uint32_t a_tile[kTile][kRowWords];  // a_tile[m][j] = {a[m, 2j], a[m, 2j + 1]}
  alignas(16) __shared__ std::uint32_t b_tile[kTile][kRowWords];  // b_tile[n][j] = {b[2j, n], b[2j + 1, n]}
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int g = lane / 4, t = lane % 4;                  // the fragments' row group and pair
  const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;  // this warp's part of the tile
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * kTile;
  const std::int64_t col0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  for (std::int64_t z = blockIdx.z; z < p.batches; z += gridDim.z) {
    std::int64_t oc, o_a, o_b;
    batch_offsets(p, z, oc, o_a, o_b);
    const bfloat16* a = at<bfloat16>(p.a) + o_a;
    const bfloat16* b = at<bfloat16>(p.b) + o_b;
    float acc[4][4][4] = {};  // [16-row fragment][8-column fragment][its 4 values]
    std::uint32_t next_a[8], next_b[8];
    load_step(a, oa, row0, 0, p.k, next_a);
    load_step(b, ob, col0, 0, p.k, next_b);
    for (std::int64_t k0 = 0; k0 < p.k; k0 += kStepK) {
      store_step(a_tile, oa.staging, next_a);
      store_step(b_tile, ob.staging, next_b);
      __syncthreads();
      if (k0 + kStepK < p.k) {  // in flight while the warps multiply this step
        load_step(a, oa, row0, k0 + kStepK, p.k, next_a);
        load_step(b, ob, col0, k0 + kStepK, p.k, next_b);
      }
      STEPFORMER_UNROLL
      for (int j0 = 0; j0 < kPairs; j0 += 8) {  // 16 of k: 8 pairs
        std::uint32_t af[4][4], bf[4][2];
        STEPFORMER_UNROLL
        for (int i = 0; i < 4; ++i) {
          const int r = wm + 16 * i + g;
          af[i][0] = a_tile[r][j0 + t];
          af[i][1] = a_tile[r + 8][j0 + t];
          af[i][2] = a_tile[r][j0 + 4 + t];
          af[i][3] = a_tile[r + 8][j0 + 4 + t];
        }
        STEPFORMER_UNROLL
        for (int j = 0; j < 4; ++j) {
          bf[j][0] = b_tile[wn + 8 * j + g][j0 + t];
          bf[j][1] = b_tile[wn + 8 * j + g][j0 + 4 + t];
        }
        STEPFORMER_UNROLL
        for (int i = 0; i < 4; ++i) {
          STEPFORMER_UNROLL
          for (int j = 0; j < 4; ++j) mma_m16n8k16_bf16(acc[i][j], af[i], bf[j]);
        }
      }
      __syncthreads();  // every warp is done with the tiles before the next step overwrites them
    }
    STEPFORMER_UNROLL
    for (int i = 0; i < 4; ++i) {
      STEPFORMER_UNROLL
      for (int j = 0; j < 4; ++j) {
        STEPFORMER_UNROLL
        for (int v = 0; v < 4; ++v) {
          const std::int64_t r = row0 + wm + 16 * i + g + 8 * (v / 2), c = col0 + wn + 8 * j + 2 * t + v % 2;
          if (r < p.m && c < p.n) store(at<TC>(p.c) + oc + r * p.ldc_m + c * p.ldc_n, acc[i][j][v], alpha, beta);
        }
      }
    }
  }
}

// How an operand [rows along r, K along k] with the given strides (and batch strides) is staged.
Operand operand(const TensorDesc& d, std::int64_t rows, std::int64_t ld_r, std::int64_t ld_k, std::int64_t K) {
  const bool aligned = batches_16_byte_aligned(d);
  int staging = ld_k == 1 ? kScalarAlongK : kScalarAlongRows;
  if (aligned && K % 8 == 0 && ld_k == 1 && ld_r % 8 == 0) staging = kVectorAlongK;
  if (aligned && K % 2 == 0 && ld_r == 1 && ld_k % 8 == 0 && rows % 8 == 0) staging = kVectorAlongRows;
  return {rows, ld_r, ld_k, staging};
}

}  // namespace

void gemm_tensor_cores(const Problem& p, DType c_dtype, double alpha, double beta) {
  check_bf16_operands("v4", p, c_dtype);
  const Operand oa = operand(p.a, p.m, p.lda_m, p.lda_k, p.k);
  const Operand ob = operand(p.b, p.n, p.ldb_n, p.ldb_k, p.k);
  const dim3 grid(tiles(p.n, kTile), tiles(p.m, kTile), batch_grid(p));
  next_launch_flops(static_cast<std::uint64_t>(2 * p.m * p.n * p.k * p.batches));
  const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
  if (c_dtype == DType::float32) return launch(gemm_v4<float>, grid, dim3(kThreads), 0, p, oa, ob, al, be);
  launch(gemm_v4<bfloat16>, grid, dim3(kThreads), 0, p, oa, ob, al, be);
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
