// The GEMM ladder (ladders.h): c = alpha a b + beta c on strided (possibly batched, possibly transposed)
// operands, six numbered versions — the path every CUDA GEMM tutorial walks (Simon Boehm, "How to optimize a
// CUDA matmul kernel"; CUTLASS's documentation). v1 and v2 live here; v3, register blocking, is the production
// kernel of float32 and float64 (gemm.cu); v4, the tensor cores, has a file of its own (gemm_tensor_cores.cu);
// v5, v4 fed by ldmatrix and cp.async (gemm_pipelined.cu), is the production kernel of bfloat16 operands; v6,
// Hopper's wgmma (gemm_wgmma.cu), is proven on cuda-sim and not yet run on a GPU. Each is checked against the CPU
// in tests/cuda/test_cuda_backend.cpp; run one with
// `build/cudasim-check/bin/cuda_tests "cuda: GEMM: every version of the ladder matches the CPU"`; what each buys,
// counted: `build/cudasim-check/bin/ladder_bench`.
// The batch walk and the store of c are gemm_problem.cuh's, shared by every version.
#include <algorithm>
#include <string>

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
  // EXERCISE 9.2: per 16 of K: a and b tiles in shared memory (tx along rows), barrier, sum, barrier
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

}  // namespace

void gemm_version(int version, const TensorDesc& c, const TensorDesc& a, const TensorDesc& b, double alpha,
                  double beta) {
  if (version < 1 || version > kGemmVersions)
    throw ValueError("cuda gemm: version " + std::to_string(version) + " does not exist (1 to " +
                     std::to_string(kGemmVersions) + ")");
  // v1-v3 multiply float32 and float64; v3 to v6 bfloat16 operands (v3 widening them to float32 as it
  // stages).
  const bool bf16 = a.dtype == DType::bfloat16 || b.dtype == DType::bfloat16;
  if (bf16 ? version < 3 : version > 3)
    throw DTypeError("cuda gemm: version " + std::to_string(version) + " multiplies " +
                     (version >= 4   ? "bfloat16"
                      : version == 3 ? "float32, float64 or bfloat16"
                                     : "float32 or float64") +
                     " operands, got " + std::string(dtype_name(a.dtype)) + " and " + std::string(dtype_name(b.dtype)));
  const Problem p = problem(c, a, b);
  if (p.m == 0 || p.n == 0 || p.batches == 0) return;
  if (version == 3) return gemm_register_blocked(p, c.dtype, a.dtype, alpha, beta);
  if (version == 4) return gemm_tensor_cores(p, c.dtype, alpha, beta);
  if (version == 5) return gemm_pipelined(p, c.dtype, alpha, beta);
  if (version == 6) return gemm_wgmma(p, c.dtype, alpha, beta);
  dispatch_floating(c.dtype, "gemm", [&](auto t) {
    using T = decltype(t);
    const T al = static_cast<T>(alpha), be = static_cast<T>(beta);
    next_launch_flops(static_cast<std::uint64_t>(2 * p.m * p.n * p.k * p.batches));  // a multiply and an add each
    if (version == 1)
      return launch(gemm_v1<T>, dim3(tiles(p.n, 16), tiles(p.m, 16), batch_grid(p)), dim3(16, 16), 0, p, al, be);
    launch(gemm_v2<T>, dim3(tiles(p.n, kTile), tiles(p.m, kTile), batch_grid(p)), dim3(kTile, kTile), 0, p, al, be);
  });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
