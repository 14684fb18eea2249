// GEMM v3, register blocking: the production kernel of float32 and float64 products, the third rung of the
// GEMM ladder (gemm_ladder.cu holds v1 and v2 and says how to run each; ladders.h counts them). gemm() runs it,
// and v5 (gemm_pipelined.cu) for bfloat16 operands on a GPU with bfloat16 tensor cores: faster than v4 at every
// shape cuda_gemm_bench times on an H200 (docs/performance.md).
// The batch walk and the store of c are gemm_problem.cuh's, shared by every version.
#include <algorithm>
#include <type_traits>

#include "cuda_backend.h"
#include "device_utils.cuh"
#include "gemm_problem.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

// v3, register blocking: a block of 16x16 = 256 threads computes a 64x64 tile of c; each thread owns
// 4x4 of it in registers. Per step along K the block stages a 64x8 slice of a (stored transposed,
// a_tile[k][m], so that a thread's 4 rows sit side by side) and an 8x64 slice of b in shared memory;
// then each thread reads 4 values of a and 4 of b per k and does 16 multiply-adds with them — four
// times the arithmetic per shared-memory load of v2. Thread (tx, ty) owns rows ty + 16i and columns
// tx + 16j (i, j < 4): neighbouring threads own neighbouring columns, so the final stores coalesce.
// The staging follows each operand's contiguous direction, so a warp's loads coalesce for transposed views too
// (a layer's forward multiplies by the weight's transpose, its weight gradient by the activations'): neighbouring
// threads take neighbouring k of a row-major a (and of a b contiguous along k), neighbouring m of a transposed a
// (and n of a row-major b). Each row of a tile is padded by 4 values, so the 8 threads that stage one m (or n) at
// k = 0..7 write 8 different banks.
// bfloat16 operands (TA) are widened to float32 as they are staged, and a bfloat16 product (TC) is rounded
// once as it is stored: the float32 arithmetic with half the global memory read.
constexpr int kBlockM = 64, kBlockN = 64, kBlockK = 8, kPerThread = 4, kPad = 4;

template <class T, class TA = T, class TC = T>
__global__ void __launch_bounds__(256) gemm_v3(Problem p, T alpha, T beta) {
  __shared__ T a_tile[kBlockK][kBlockM + kPad];
  __shared__ T b_tile[kBlockK][kBlockN + kPad];
  const bool a_along_m = p.lda_m == 1 && p.lda_k != 1, b_along_k = p.ldb_k == 1 && p.ldb_n != 1;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * kBlockM;
  const std::int64_t col0 = static_cast<std::int64_t>(blockIdx.x) * kBlockN;
  for (std::int64_t z = blockIdx.z; z < p.batches; z += gridDim.z) {
    std::int64_t oc, oa, ob;
    batch_offsets(p, z, oc, oa, ob);
    const TA* a = at<TA>(p.a) + oa;
    const TA* b = at<TA>(p.b) + ob;
    T acc[kPerThread][kPerThread] = {};
    for (std::int64_t k0 = 0; k0 < p.k; k0 += kBlockK) {
      // 512 elements of each slice, 2 per thread.
      for (int e = tid; e < kBlockM * kBlockK; e += 256) {
        const int m = a_along_m ? e % kBlockM : e / kBlockK, k = a_along_m ? e / kBlockM : e % kBlockK;
        const std::int64_t gm = row0 + m, gk = k0 + k;
        a_tile[k][m] = (gm < p.m && gk < p.k) ? static_cast<T>(a[gm * p.lda_m + gk * p.lda_k]) : T(0);
      }
      for (int e = tid; e < kBlockK * kBlockN; e += 256) {
        const int k = b_along_k ? e % kBlockK : e / kBlockN, n = b_along_k ? e / kBlockK : e % kBlockN;
        const std::int64_t gk = k0 + k, gn = col0 + n;
        b_tile[k][n] = (gk < p.k && gn < p.n) ? static_cast<T>(b[gk * p.ldb_k + gn * p.ldb_n]) : T(0);
      }
      __syncthreads();
      for (int k = 0; k < kBlockK; ++k) {
        T a_reg[kPerThread], b_reg[kPerThread];
        for (int i = 0; i < kPerThread; ++i) a_reg[i] = a_tile[k][ty + 16 * i];
        for (int j = 0; j < kPerThread; ++j) b_reg[j] = b_tile[k][tx + 16 * j];
        for (int i = 0; i < kPerThread; ++i)
          for (int j = 0; j < kPerThread; ++j) acc[i][j] += a_reg[i] * b_reg[j];
      }
      __syncthreads();
    }
    for (int i = 0; i < kPerThread; ++i)
      for (int j = 0; j < kPerThread; ++j) {
        const std::int64_t r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
        if (r < p.m && c < p.n) store(at<TC>(p.c) + oc + r * p.ldc_m + c * p.ldc_n, acc[i][j], alpha, beta);
      }
  }
}

}  // namespace

void gemm_register_blocked(const Problem& p, DType c_dtype, DType ab_dtype, double alpha, double beta) {
  dispatch_gemm(c_dtype, ab_dtype, "cuda gemm", [&](auto tc, auto tab) {
    using TC = decltype(tc);
    using TA = decltype(tab);
    using T = std::conditional_t<std::is_same_v<TA, double>, double, float>;         // bfloat16 sums in float32
    next_launch_flops(static_cast<std::uint64_t>(2 * p.m * p.n * p.k * p.batches));  // a multiply and an add each
    launch(gemm_v3<T, TA, TC>, dim3(tiles(p.n, kBlockN), tiles(p.m, kBlockM), batch_grid(p)), dim3(16, 16), 0, p,
           static_cast<T>(alpha), static_cast<T>(beta));
  });
}

void CudaBackend::gemm(const TensorDesc& c, const TensorDesc& a, const TensorDesc& b, double alpha, double beta) {
  const Problem p = problem(c, a, b);
  if (p.m == 0 || p.n == 0 || p.batches == 0) return;
  static const bool tensor_cores = has_bf16_tensor_cores();
  if (a.dtype == DType::bfloat16 && tensor_cores) return gemm_pipelined(p, c.dtype, alpha, beta);
  gemm_register_blocked(p, c.dtype, a.dtype, alpha, beta);
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
