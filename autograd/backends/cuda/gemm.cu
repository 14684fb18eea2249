// Matrix multiply c = alpha * a @ b + beta * c on strided (possibly batched, possibly transposed)
// operands, in three numbered versions — the path every CUDA GEMM tutorial walks (Simon Boehm,
// "How to optimize a CUDA matmul kernel"; CUTLASS's documentation). Each is checked against the CPU
// in tests/cuda; gemm() uses v3, and v4 (tensor cores) for bfloat16 operands.
//
// Batches: blockIdx.z walks the batch (grid-stride past 65535); batch_offsets turns it into an offset
// in each operand through its batch strides (stride 0 where the operand broadcasts over the batch).
// beta == 0 never reads c, as BLAS: c may hold garbage (fresh memory is NaN-poisoned under cuda-sim).
#include <algorithm>

#include "cuda_backend.h"
#include "device_utils.cuh"
#include "gemm_problem.cuh"
#include "ladders.h"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

// v1, naive: one thread per element of c, a 16x16 block of threads per 16x16 tile of c. Thread (x, y)
// walks row y of a and column x of b straight from global memory: 2K loads for 2K flops, so the
// kernel waits on memory. Threads with consecutive x read consecutive columns of b (coalesced when
// b is row-major) and the same element of a (a broadcast).
template <class T>
__global__ void gemm_v1(Problem p, T alpha, T beta) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t z = blockIdx.z; z < p.batches; z += gridDim.z) {
    std::int64_t oc, oa, ob;
    batch_offsets(p, z, oc, oa, ob);
    if (row >= p.m || col >= p.n) continue;
    const T* a = at<T>(p.a) + oa + row * p.lda_m;
    const T* b = at<T>(p.b) + ob + col * p.ldb_n;
    T acc = 0;
    for (std::int64_t k = 0; k < p.k; ++k) acc += a[k * p.lda_k] * b[k * p.ldb_k];
    store(at<T>(p.c) + oc + row * p.ldc_m + col * p.ldc_n, acc, alpha, beta);
  }
}

// v2, shared-memory tiles: the block's 16x16 threads load a 16x16 tile of a and one of b into shared
// memory (one element each), __syncthreads, multiply the tiles from shared memory, __syncthreads,
// next tile along K. Each global element is now read by one thread of the block instead of 16.
// Out-of-range elements load as 0. Counted by cuda-sim's profiler (docs/09_cuda.md): a warp is two rows
// of 16 threads, so a row-major load of either tile is 2 x 64 bytes, 4 sectors; reading a_tile[ty][k] is a
// broadcast of 2 words, b_tile[k][tx] 16 neighbouring words: no bank conflicts. (A 17th column in b_tile,
// tried, made every store of it conflict once: rows ty and ty + 1 then start 17 words apart.)
constexpr int kTile = 16;

template <class T>
__global__ void gemm_v2(Problem p, T alpha, T beta) {
  // EXERCISE 9.2 (5 points): per 16 of K: a and b tiles in shared memory (tx along rows), barrier, sum, barrier
  __shared__ T a_tile[kTile][kTile];
  __shared__ T b_tile[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.y) * kTile + ty;
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kTile + tx;
  for (std::int64_t z = blockIdx.z; z < p.batches; z += gridDim.z) {
    std::int64_t oc, oa, ob;
    batch_offsets(p, z, oc, oa, ob);
    const T* a = at<T>(p.a) + oa;
    const T* b = at<T>(p.b) + ob;
    T acc = 0;
    for (std::int64_t k0 = 0; k0 < p.k; k0 += kTile) {
      // Thread (tx, ty) loads a[row, k0 + tx] and b[k0 + ty, col].
      a_tile[ty][tx] = (row < p.m && k0 + tx < p.k) ? a[row * p.lda_m + (k0 + tx) * p.lda_k] : T(0);
      b_tile[ty][tx] = (k0 + ty < p.k && col < p.n) ? b[(k0 + ty) * p.ldb_k + col * p.ldb_n] : T(0);
      __syncthreads();  // the tiles are complete before anyone reads them
      for (int k = 0; k < kTile; ++k) acc += a_tile[ty][k] * b_tile[k][tx];
      __syncthreads();  // everyone is done reading before the next tiles overwrite them
    }
    if (row < p.m && col < p.n) store(at<T>(p.c) + oc + row * p.ldc_m + col * p.ldc_n, acc, alpha, beta);
  }
  // END EXERCISE
}

// v3, register blocking: a block of 16x16 = 256 threads computes a 64x64 tile of c; each thread owns
// 4x4 of it in registers. Per step along K the block stages a 64x8 slice of a (stored transposed,
// a_tile[k][m], so that a thread's 4 rows sit side by side) and an 8x64 slice of b in shared memory;
// then each thread reads 4 values of a and 4 of b per k and does 16 multiply-adds with them — four
// times the arithmetic per shared-memory load of v2. Thread (tx, ty) owns rows ty + 16i and columns
// tx + 16j (i, j < 4): neighbouring threads own neighbouring columns, so the final stores coalesce.
// bfloat16 operands (TA) are widened to float32 as they are staged, and a bfloat16 product (TC) is rounded
// once as it is stored: the float32 arithmetic with half the global memory read.
constexpr int kBlockM = 64, kBlockN = 64, kBlockK = 8, kPerThread = 4;

template <class T, class TA = T, class TC = T>
__global__ void __launch_bounds__(256) gemm_v3(Problem p, T alpha, T beta) {
  __shared__ T a_tile[kBlockK][kBlockM];
  __shared__ T b_tile[kBlockK][kBlockN];
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
        const int m = e / kBlockK, k = e % kBlockK;
        const std::int64_t gm = row0 + m, gk = k0 + k;
        a_tile[k][m] = (gm < p.m && gk < p.k) ? static_cast<T>(a[gm * p.lda_m + gk * p.lda_k]) : T(0);
      }
      for (int e = tid; e < kBlockK * kBlockN; e += 256) {
        const int k = e / kBlockN, n = e % kBlockN;
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

void gemm_version(int version, const TensorDesc& c, const TensorDesc& a, const TensorDesc& b, double alpha,
                  double beta) {
  if (version < 1 || version > 3)
    throw ValueError("cuda gemm: version " + std::to_string(version) + " does not exist (1, 2 or 3)");
  const Problem p = problem(c, a, b);
  if (p.m == 0 || p.n == 0 || p.batches == 0) return;
  const unsigned batch_blocks = static_cast<unsigned>(std::min<std::int64_t>(p.batches, 65535));
  dispatch_floating(c.dtype, "gemm", [&](auto t) {
    using T = decltype(t);
    const T al = static_cast<T>(alpha), be = static_cast<T>(beta);
    next_launch_flops(static_cast<std::uint64_t>(2 * p.m * p.n * p.k * p.batches));  // a multiply and an add each
    switch (version) {
      case 1: return launch(gemm_v1<T>, dim3(tiles(p.n, 16), tiles(p.m, 16), batch_blocks), dim3(16, 16), 0, p, al, be);
      case 2:
        return launch(gemm_v2<T>, dim3(tiles(p.n, kTile), tiles(p.m, kTile), batch_blocks), dim3(kTile, kTile), 0, p,
                      al, be);
      case 3:
        return launch(gemm_v3<T>, dim3(tiles(p.n, kBlockN), tiles(p.m, kBlockM), batch_blocks), dim3(16, 16), 0, p, al,
                      be);
      default: return;
    }
  });
}

void CudaBackend::gemm(const TensorDesc& c, const TensorDesc& a, const TensorDesc& b, double alpha, double beta) {
  if (a.dtype != DType::bfloat16) return gemm_version(3, c, a, b, alpha, beta);
  const Problem p = problem(c, a, b);
  if (p.m == 0 || p.n == 0 || p.batches == 0) return;
  const unsigned batch_blocks = static_cast<unsigned>(std::min<std::int64_t>(p.batches, 65535));
  static const bool tensor_cores = has_bf16_tensor_cores();
  dispatch_gemm(c.dtype, a.dtype, "cuda gemm", [&](auto tc, auto tab) {
    using TC = decltype(tc);
    using TA = decltype(tab);
    if (tensor_cores) return gemm_tensor_cores(p, c.dtype, alpha, beta);
    next_launch_flops(static_cast<std::uint64_t>(2 * p.m * p.n * p.k * p.batches));
    launch(gemm_v3<float, TA, TC>, dim3(tiles(p.n, kBlockN), tiles(p.m, kBlockM), batch_blocks), dim3(16, 16), 0, p,
           static_cast<float>(alpha), static_cast<float>(beta));
  });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
