// One row of c: c[1, N] = alpha a[1, K] b[K, N] + beta c, each batch apart — a layer's product for one token, as
// decoding makes (one new token a step). Such a product is a matrix-vector product: each of b's K N values is read
// once and used once, so it is bound by memory, not by arithmetic. A tiled GEMM spends nearly all of its tile
// on rows that are not there (v3 computes 64 rows of c to keep one, v5 128) and launches a few blocks (N / 64)
// that each walk all of K; on an H200 the one-row products of a generated token took 1.37 ms of its 3.2 in
// float32 (docs/performance.md). Here a warp owns one element of c: its 32 lanes read b's column n 32 values at a
// time (b contiguous along K: a layer's weight transposed, a linear layer's forward), each lane keeps a partial
// sum of every 32nd k in increasing order, and warp_reduce's butterfly adds the 32 partials: the same order on
// every run. bfloat16 operands are widened as they are read and summed in float32, as v3 does.
#include <type_traits>

#include "cuda_backend.h"
#include "device_utils.cuh"
#include "gemm_problem.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

template <class T, class TA, class TC>
__global__ void gemv_kernel(Problem p, T alpha, T beta) {
  const int lane = threadIdx.x;
  for (std::int64_t z = blockIdx.y; z < p.batches; z += gridDim.y) {
    std::int64_t oc, oa, ob;
    batch_offsets(p, z, oc, oa, ob);
    const TA* a = at<TA>(p.a) + oa;
    const TA* b = at<TA>(p.b) + ob;
    for (std::int64_t n = first_row(); n < p.n; n += row_stride()) {  // a warp per column of b, as a row kernel's
      const TA* column = b + n * p.ldb_n;
      T partial = 0;
      for (std::int64_t k = lane; k < p.k; k += kWarp)
        partial += static_cast<T>(a[k * p.lda_k]) * static_cast<T>(column[k]);
      const T sum = warp_reduce(partial, Sum{});
      if (lane == 0) store(at<TC>(p.c) + oc + n * p.ldc_n, sum, alpha, beta);
    }
  }
}

}  // namespace

bool gemv_fits(const Problem& p) { return p.m == 1 && p.ldb_k == 1; }

void gemv(const Problem& p, DType c_dtype, DType ab_dtype, double alpha, double beta) {
  dispatch_gemm(c_dtype, ab_dtype, "cuda gemm", [&](auto tc, auto tab) {
    using TC = decltype(tc);
    using TA = decltype(tab);
    using T = std::conditional_t<std::is_same_v<TA, double>, double, float>;  // bfloat16 sums in float32
    next_launch_flops(static_cast<std::uint64_t>(2 * p.n * p.k * p.batches));
    launch(gemv_kernel<T, TA, TC>, dim3(row_grid(p.n).x, batch_grid(p)), row_block(), 0, p, static_cast<T>(alpha),
           static_cast<T>(beta));
  });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
