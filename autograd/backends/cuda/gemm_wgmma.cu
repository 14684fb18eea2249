// GEMM v6, the sixth rung of the GEMM ladder (ladders.h): the tensor cores as Hopper (compute capability 9.0)
// drives them. c = alpha a b + beta c with bfloat16 a and b, float32 sums, a float32 or bfloat16 c, as v5.
// What changes over v5 (gemm_pipelined.cu) is who feeds the tensor cores:
// - wgmma: the 4 warps of a warpgroup issue one instruction for a 64 x 128 tile of c over 16 of k, and the tensor
//   cores read both operands straight from shared memory, through a descriptor per operand (its address and the
//   distances between its 8 x 8 pieces). v5's warps first load every fragment into registers with ldmatrix (8 per
//   16 of k per warp) and issue 32 mma.sync of 16 x 8 each; here nothing passes through the registers but the sums.
// - asynchronous: the instruction returns at once; the warps commit the step's 4 products as a group and wait for
//   it before the next step's copies may overwrite its stage.
// - shared memory in wgmma's own layout: core matrices of 8 rows of 16 bytes, 128 contiguous bytes each, where a
//   row holds 8 values of k of one row of the operand (an operand staged along k) or 8 rows at one k (staged along
//   its rows; the instruction's transpose bit then says so). A tile of 128 rows by 32 of k is 16 x 4 core matrices,
//   the 4 along k side by side (LBO = 128 bytes), the groups of 8 rows 512 bytes apart (SBO). A 16-byte cp.async
//   moves one row of a core matrix, so v5's staging (gemm_staging.cuh) serves with another Layout; no padding.
// One warpgroup per block, its 128 x 128 tile of c as two 64-row halves (2 x 64 float32 sums per thread, as v5's
// 128 per lane), k in steps of 32 through v5's three cp.async stages (48 KB).
// Not yet here: the TMA (one thread's bulk copy of a whole tile, with the swizzled layouts that spare shared memory
// its bank conflicts) and a producer warpgroup that copies while two consumers multiply: CUTLASS's Hopper kernels.
// On cuda-sim the instruction is emulated (compat.cuh's WarpgroupMma: each product runs at its wait, the latest
// moment a GPU may), so the oracle and the checks run on v6 as on every rung; a GPU runs it only with sm_90a code
// (CMAKE_CUDA_ARCHITECTURES holding 90a) on a compute capability 9.0 device, and gemm() keeps v5 until a GPU
// measures v6 faster (docs/09_cuda.md).
#include <string>

#include "gemm_staging.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

using staging::kStepK, staging::kThreads, staging::kTile, staging::Operand;
constexpr int kStages = 3;
constexpr int kCore = 64;                                            // values in a core matrix: 8 rows of 8
constexpr std::uint32_t kLbo = 2 * kCore, kSbo = kStepK / 8 * kLbo;  // bytes: next along k, next 8 rows
constexpr int kStageValues = kTile * kStepK;                         // one operand's step: 16 x 4 core matrices
constexpr std::size_t kSharedBytes = sizeof(bfloat16) * kStages * 2 * kStageValues;

using Copies = AsyncCopies<staging::kCopiesPerStep * kStages>;
using Mma = WarpgroupMma<4>;  // one step's group of 4 products

// Where a piece of 8 values goes (staging::stage's Layout): row r % 8 (along k) or k % 8 (along rows) of the core
// matrix of rows r / 8 and k / 8.
struct CoreMatrices {
  __device__ __forceinline__ int operator()(int r, int k, bool k_major) const {
    return (r / 8 * (kStepK / 8) + k / 8) * kCore + (k_major ? r % 8 : k % 8) * 8;
  }
};

// The descriptor of 64 (a) or 128 (b) rows from `row` and 16 of k from k of a staged tile.
__device__ __forceinline__ std::uint64_t descriptor(const bfloat16* tile, int row, int k) {
  return wgmma_descriptor(shared_window(tile + CoreMatrices{}(row, k, true)), kLbo, kSbo);
}

// kAK, kBK: whether a and b are staged along k (the instruction's transpose bits, fixed per launch).
template <class TC, bool kAK, bool kBK>
__global__ void __launch_bounds__(kThreads) gemm_v6(Problem p, Operand oa, Operand ob, float alpha, float beta) {
  CUDASIM_DYNAMIC_SHARED(bfloat16, shared);  // [stage][a, b][kStageValues]
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int g = lane / 4, t = lane % 4;
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
      staging::stage(a, oa, row0, step * kStepK, p.k, a_tile(step), copies, CoreMatrices{});
      staging::stage(b, ob, col0, step * kStepK, p.k, b_tile(step), copies, CoreMatrices{});
    };
    float acc[2][64] = {};  // [64-row half][the warpgroup's fragments: 16 of 8 columns, 4 values each]
    Copies copies;
    Mma mma;
    for (int s = 0; s < kStages - 1; ++s) {  // the first steps in flight; one group per step, empty past the end
      if (s < steps) stage_step(s, copies);
      copies.commit();
    }
    for (std::int64_t step = 0; step < steps; ++step) {
      copies.wait<kStages - 2>();  // this thread's copies of `step` have landed
      fence_async_shared();        // and are visible to the tensor cores' reads
      __syncthreads();             // everyone's have; everyone's products of step - 1 are done (waited below)
      if (step + kStages - 1 < steps) stage_step(step + kStages - 1, copies);  // into step - 1's buffers
      copies.commit();
      fence_operands(acc[0]), fence_operands(acc[1]);
      mma.fence();
      STEPFORMER_UNROLL
      for (int k = 0; k < kStepK; k += 16) {
        STEPFORMER_UNROLL
        for (int h = 0; h < 2; ++h)
          mma.mma_m64n128k16<!kAK, !kBK>(acc[h], descriptor(a_tile(step), 64 * h, k), descriptor(b_tile(step), 0, k));
      }
      mma.commit();
      mma.wait<0>();  // the sums are in acc, and the stage may be overwritten
      fence_operands(acc[0]), fence_operands(acc[1]);
    }
    __syncthreads();  // every warp is done with the buffers before the next batch stages into them
    STEPFORMER_UNROLL
    for (int h = 0; h < 2; ++h) {
      STEPFORMER_UNROLL
      for (int i = 0; i < 64; ++i) {  // fragment i / 4 of the warp's 16 rows: columns 8 (i / 4) ..
        const std::int64_t r = row0 + 64 * h + 16 * warp + g + 8 * (i % 4 / 2), c = col0 + 8 * (i / 4) + 2 * t + i % 2;
        if (r < p.m && c < p.n) store(at<TC>(p.c) + oc + r * p.ldc_m + c * p.ldc_n, acc[h][i], alpha, beta);
      }
    }
  }
}

template <class TC, bool kAK, bool kBK>
void launch_v6(const Problem& p, const Operand& oa, const Operand& ob, float alpha, float beta) {
#if defined(__CUDACC__)
  STEPFORMER_CUDA_CHECK(cudaFuncSetAttribute(gemm_v6<TC, kAK, kBK>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(kSharedBytes)));
#endif
  const dim3 grid(tiles(p.n, kTile), tiles(p.m, kTile), batch_grid(p));
  launch(gemm_v6<TC, kAK, kBK>, grid, dim3(kThreads), kSharedBytes, p, oa, ob, alpha, beta);
}

template <class TC>
void launch_v6(const Problem& p, const Operand& oa, const Operand& ob, float alpha, float beta) {
  staging::with_layouts(oa, ob, [&](auto ak, auto bk) {
    launch_v6<TC, decltype(ak)::value, decltype(bk)::value>(p, oa, ob, alpha, beta);
  });
}

}  // namespace

void gemm_wgmma(const Problem& p, DType c_dtype, double alpha, double beta) {
  check_bf16_operands("v6", p, c_dtype);
  if (!wgmma_available())
    throw DeviceError(
        "cuda gemm v6: wgmma needs a GPU of compute capability 9.0 (Hopper) and a library built with sm_90a code "
        "(CMAKE_CUDA_ARCHITECTURES holding 90a)");
  const Operand oa = staging::operand(p.a, p.m, p.lda_m, p.lda_k, p.k);
  const Operand ob = staging::operand(p.b, p.n, p.ldb_n, p.ldb_k, p.k);
  next_launch_flops(static_cast<std::uint64_t>(2 * p.m * p.n * p.k * p.batches));
  const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
  if (c_dtype == DType::float32) return launch_v6<float>(p, oa, ob, al, be);
  launch_v6<bfloat16>(p, oa, ob, al, be);
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
