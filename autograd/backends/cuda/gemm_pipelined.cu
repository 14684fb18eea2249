// GEMM v5, the fifth rung of the GEMM ladder (ladders.h): v4's tensor cores (gemm_tensor_cores.cu) fed the way
// CUTLASS's Ampere kernels feed them (CUTLASS's documentation, "Efficient GEMM in CUDA": multistage pipelines).
// c = alpha a b + beta c with bfloat16 a and b, float32 sums, a float32 or bfloat16 c. Three changes over v4:
// - ldmatrix: a warp loads the fragments of a 16 x 16 piece of an operand with one instruction, each lane giving
//   the address of one 16-byte row, where v4's lanes read them one 32-bit word at a time (4 loads for A's
//   fragment, 2 for B's): a quarter of the shared-memory requests per fragment.
// - cp.async into three stages: the copy engine moves the operands from global to shared memory without passing
//   through registers, two steps of k ahead of the warps' multiplies, and one barrier per step (v4: two).
// - a larger warp tile: 4 warps, each 64 x 64 of the block's 128 x 128 tile of c (4 x 8 fragments, 128 float32
//   sums per lane), so each fragment loaded from shared memory feeds 8 (A) or 4 (B) mma.sync instead of 4.
// Run it alone with `build/cudasim-check/bin/cuda_tests "cuda: GEMM: every version of the ladder matches the
// CPU"` (its v5 sections); its counts against v4's: `build/cudasim-check/bin/ladder_bench`.
//
// Shared memory holds each operand as it lies in global memory, so cp.async copies it as it is:
// - an operand contiguous along k (a row-major a; b of x @ W^T) as [128 rows][32 k], its rows padded from 64 to
//   80 bytes so that the 8 rows one ldmatrix reads at a time lie in 32 different banks; ldmatrix hands out the
//   fragments as they are;
// - an operand contiguous along its rows (m of a, n of b: a row-major b, the gradients' transposed operands) as
//   [32 k][128 rows], padded from 256 to 272 bytes; ldmatrix.trans transposes each 8 x 8 piece on the way.
// A 16-byte copy needs 8 whole values at a 16-byte aligned address: K a multiple of 8 (along k) or the rows a
// multiple of 8 (along rows), aligned strides and data. Any other view is staged one value at a time with bounds
// checks, into the same layouts. The two layouts are template parameters (four kernels per type of c), so the
// fragment loads of the inner loop do not branch: read at run time there, they pushed ptxas past 255 registers into
// spills. 60 KB of shared memory per block: more than the 48 KB a launch gets without
// asking (cudaFuncSetAttribute below).
// gemm() runs v5 for bfloat16 operands: an H200 timed it faster than v4 at every shape (docs/09_cuda.md).
#include <string>

#include "gemm_staging.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

using staging::kChunks, staging::kStepK, staging::kThreads, staging::kTile, staging::Operand;
constexpr int kStages = 3;
constexpr int kAlongKRow = kStepK + 8;    // values per row of an operand staged along k
constexpr int kAlongRowsRow = kTile + 8;  // values per k of an operand staged along its rows
constexpr int kStageValues = kTile * kAlongKRow > kStepK* kAlongRowsRow ? kTile* kAlongKRow : kStepK* kAlongRowsRow;
constexpr std::size_t kSharedBytes = sizeof(bfloat16) * kStages * 2 * kStageValues;

using Copies = AsyncCopies<staging::kCopiesPerStep * kStages>;

// Where a piece of 8 values goes (staging::stage's Layout): along k, into row r's padded row of 32 values of k;
// along rows, into k's padded row of 128 rows.
struct Padded {
  __device__ __forceinline__ int operator()(int r, int k, bool k_major) const {
    return k_major ? r * kAlongKRow + k : k * kAlongRowsRow + r;
  }
};

// A's fragments for 16 rows from m and 16 of k from k (mma_m16n8k16_bf16's a), or two of B's (8 columns each, from
// n: its b for columns n..n+7 in f[0], f[1], for n+8..n+15 in f[2], f[3]).
template <bool kAlongK>
__device__ __forceinline__ void a_fragment(std::uint32_t (&f)[4], const bfloat16* tile, int m, int k) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp, q = lane / 8;  // lane gives row lane % 8 of matrix q
  if (kAlongK)  // matrices: rows m..m+7 at k, m+8.. at k, m.. at k+8, m+8.. at k+8
    return ldmatrix_x4(f, tile + (m + lane % 16) * kAlongKRow + k + lane / 16 * 8, false);
  ldmatrix_x4(f, tile + (k + q / 2 * 8 + lane % 8) * kAlongRowsRow + m + q % 2 * 8, true);
}
template <bool kAlongK>
__device__ __forceinline__ void b_fragments(std::uint32_t (&f)[4], const bfloat16* tile, int n, int k) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp, q = lane / 8;
  if (kAlongK)  // matrices: columns n..n+7 at k, n.. at k+8, n+8.. at k, n+8.. at k+8
    return ldmatrix_x4(f, tile + (n + lane % 8 + q / 2 * 8) * kAlongKRow + k + q % 2 * 8, false);
  ldmatrix_x4(f, tile + (k + q % 2 * 8 + lane % 8) * kAlongRowsRow + n + q / 2 * 8, true);
}

// kAK, kBK: whether a and b are staged along k (the layout, fixed per launch, so the fragment loads do not branch).
template <class TC, bool kAK, bool kBK>
__global__ void __launch_bounds__(kThreads) gemm_v5(Problem p, Operand oa, Operand ob, float alpha, float beta) {
  CUDASIM_DYNAMIC_SHARED(bfloat16, shared);  // [stage][a, b][kStageValues]
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int g = lane / 4, t = lane % 4;
  const int wm = (warp / 2) * 64, wn = (warp % 2) * 64;  // this warp's part of the tile
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * kTile;
  const std::int64_t col0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  const std::int64_t steps = (p.k + kStepK - 1) / kStepK;
  const auto a_tile = [&](std::int64_t step) { return shared + (step % kStages * 2) * kStageValues; };
  const auto b_tile = [&](std::int64_t step) { return shared + (step % kStages * 2 + 1) * kStageValues; };
  for (std::int64_t z = blockIdx.z; z < p.batches; z += gridDim.z) {
    std::int64_t oc, o_a, o_b;
    batch_offsets(p, z, oc, o_a, o_b);
    const bfloat16* a = at<bfloat16>(p.a) + o_a;
    const bfloat16* b = at<bfloat16>(p.b) + o_b;
    const auto stage_step = [&](std::int64_t step, Copies& copies) {
      staging::stage(a, oa, row0, step * kStepK, p.k, a_tile(step), copies, Padded{});
      staging::stage(b, ob, col0, step * kStepK, p.k, b_tile(step), copies, Padded{});
    };
    float acc[4][8][4] = {};  // [16-row fragment][8-column fragment][its 4 values]
    Copies copies;
    for (int s = 0; s < kStages - 1; ++s) {  // the first steps in flight; one group per step, empty past the end
      if (s < steps) stage_step(s, copies);
      copies.commit();
    }
    for (std::int64_t step = 0; step < steps; ++step) {
      copies.wait<kStages - 2>();  // this thread's copies of `step` have landed
      __syncthreads();             // everyone's have; and everyone is done with step - 1's buffers
      if (step + kStages - 1 < steps) stage_step(step + kStages - 1, copies);  // into step - 1's buffers
      copies.commit();
      STEPFORMER_UNROLL
      for (int k = 0; k < kStepK; k += 16) {
        std::uint32_t af[4][4], bf[8][2];
        STEPFORMER_UNROLL
        for (int i = 0; i < 4; ++i) a_fragment<kAK>(af[i], a_tile(step), wm + 16 * i, k);
        STEPFORMER_UNROLL
        for (int j = 0; j < 8; j += 2) {
          std::uint32_t two[4];
          b_fragments<kBK>(two, b_tile(step), wn + 8 * j, k);
          bf[j][0] = two[0], bf[j][1] = two[1], bf[j + 1][0] = two[2], bf[j + 1][1] = two[3];
        }
        STEPFORMER_UNROLL
        for (int i = 0; i < 4; ++i) {
          STEPFORMER_UNROLL
          for (int j = 0; j < 8; ++j) mma_m16n8k16_bf16(acc[i][j], af[i], bf[j]);
        }
      }
    }
    __syncthreads();  // every warp is done with the buffers before the next batch stages into them
    STEPFORMER_UNROLL
    for (int i = 0; i < 4; ++i) {
      STEPFORMER_UNROLL
      for (int j = 0; j < 8; ++j) {
        STEPFORMER_UNROLL
        for (int v = 0; v < 4; ++v) {
          const std::int64_t r = row0 + wm + 16 * i + g + 8 * (v / 2), c = col0 + wn + 8 * j + 2 * t + v % 2;
          if (r < p.m && c < p.n) store(at<TC>(p.c) + oc + r * p.ldc_m + c * p.ldc_n, acc[i][j][v], alpha, beta);
        }
      }
    }
  }
}

template <class TC, bool kAK, bool kBK>
void launch_v5(const Problem& p, const Operand& oa, const Operand& ob, float alpha, float beta) {
#if defined(__CUDACC__)
  // More dynamic shared memory than the default 48 KB: the kernel asks for it (an A100 or H100 allows 163 / 227 KB).
  STEPFORMER_CUDA_CHECK(cudaFuncSetAttribute(gemm_v5<TC, kAK, kBK>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(kSharedBytes)));
#endif
  const dim3 grid(tiles(p.n, kTile), tiles(p.m, kTile), batch_grid(p));
  launch(gemm_v5<TC, kAK, kBK>, grid, dim3(kThreads), kSharedBytes, p, oa, ob, alpha, beta);
}

template <class TC>
void launch_v5(const Problem& p, const Operand& oa, const Operand& ob, float alpha, float beta) {
  staging::with_layouts(oa, ob, [&](auto ak, auto bk) {
    launch_v5<TC, decltype(ak)::value, decltype(bk)::value>(p, oa, ob, alpha, beta);
  });
}

}  // namespace

void gemm_pipelined(const Problem& p, DType c_dtype, double alpha, double beta) {
  check_bf16_operands("v5", p, c_dtype);
  const Operand oa = staging::operand(p.a, p.m, p.lda_m, p.lda_k, p.k);
  const Operand ob = staging::operand(p.b, p.n, p.ldb_n, p.ldb_k, p.k);
  next_launch_flops(static_cast<std::uint64_t>(2 * p.m * p.n * p.k * p.batches));
  const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
  if (c_dtype == DType::float32) return launch_v5<float>(p, oa, ob, al, be);
  launch_v5<bfloat16>(p, oa, ob, al, be);
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
