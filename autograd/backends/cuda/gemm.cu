// GEMM v3, register blocking: the production kernel of float32 and float64 products, the third rung of the
// GEMM ladder (gemm_ladder.cu holds v1 and v2 and says how to run each; ladders.h counts them). gemm() runs it,
// and v5 (gemm_pipelined.cu) for bfloat16 operands on a GPU with bfloat16 tensor cores: faster than v4 at every
// shape cuda_gemm_bench times on an H200 (docs/performance.md); a product of one row (a generated token's) runs
// gemv.cu's kernel instead, whatever the dtype.
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
// Double-buffered: the slices alternate between two tiles. A thread's loads of the next slice (2 values of each
// operand, into registers) are issued before it multiplies this one, so their latency passes while it computes,
// and it stores them into the other tile afterwards: one barrier a step instead of two (the one after the store
// also ends every read of the tile the next step overwrites).
// bfloat16 operands (TA) are widened to float32 as they are staged, and a bfloat16 product (TC) is rounded
// once as it is stored: the float32 arithmetic with half the global memory read.
constexpr int kBlockM = 64, kBlockN = 64, kBlockK = 8, kPerThread = 4, kPad = 4;
constexpr int kStaged = kBlockM * kBlockK / 256;  // values of each operand a thread stages per step

// A thread's share of the slices at k0, read from global memory into registers (zeros past the edges).
template <class T, class TA>
__device__ __forceinline__ void load_slices(const Problem& p, const TA* a, const TA* b, std::int64_t row0,
                                            std::int64_t col0, std::int64_t k0, int tid, T (&a_next)[kStaged],
                                            T (&b_next)[kStaged]) {
  const bool a_along_m = p.lda_m == 1 && p.lda_k != 1, b_along_k = p.ldb_k == 1 && p.ldb_n != 1;
  for (int s = 0; s < kStaged; ++s) {
    const int e = tid + 256 * s;
    const int am = a_along_m ? e % kBlockM : e / kBlockK, ak = a_along_m ? e / kBlockM : e % kBlockK;
    const std::int64_t gm = row0 + am, gka = k0 + ak;
    a_next[s] = (gm < p.m && gka < p.k) ? static_cast<T>(a[gm * p.lda_m + gka * p.lda_k]) : T(0);
    const int bk = b_along_k ? e % kBlockK : e / kBlockN, bn = b_along_k ? e / kBlockK : e % kBlockN;
    const std::int64_t gkb = k0 + bk, gn = col0 + bn;
    b_next[s] = (gkb < p.k && gn < p.n) ? static_cast<T>(b[gkb * p.ldb_k + gn * p.ldb_n]) : T(0);
  }
}

// The registers load_slices filled, into one of the two tiles (the same coordinates).
template <class T>
__device__ __forceinline__ void store_slices(const Problem& p, int tid, const T (&a_next)[kStaged],
                                             const T (&b_next)[kStaged], T (&a_tile)[kBlockK][kBlockM + kPad],
                                             T (&b_tile)[kBlockK][kBlockN + kPad]) {
  const bool a_along_m = p.lda_m == 1 && p.lda_k != 1, b_along_k = p.ldb_k == 1 && p.ldb_n != 1;
  for (int s = 0; s < kStaged; ++s) {
    const int e = tid + 256 * s;
    a_tile[a_along_m ? e / kBlockM : e % kBlockK][a_along_m ? e % kBlockM : e / kBlockK] = a_next[s];
    b_tile[b_along_k ? e % kBlockK : e / kBlockN][b_along_k ? e / kBlockK : e % kBlockN] = b_next[s];
  }
}

template <class T, class TA = T, class TC = T>
__global__ void __launch_bounds__(256) gemm_v3(Problem p, T alpha, T beta) {
  __shared__ T a_tile[2][kBlockK][kBlockM + kPad];
  __shared__ T b_tile[2][kBlockK][kBlockN + kPad];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * kBlockM;
  const std::int64_t col0 = static_cast<std::int64_t>(blockIdx.x) * kBlockN;
  for (std::int64_t z = blockIdx.z; z < p.batches; z += gridDim.z) {
    std::int64_t oc, oa, ob;
    batch_offsets(p, z, oc, oa, ob);
    const TA* a = at<TA>(p.a) + oa;
    const TA* b = at<TA>(p.b) + ob;
    T acc[kPerThread][kPerThread] = {};
    T a_next[kStaged], b_next[kStaged];
    load_slices(p, a, b, row0, col0, 0, tid, a_next, b_next);
    store_slices(p, tid, a_next, b_next, a_tile[0], b_tile[0]);
    __syncthreads();
    int tile = 0;
    for (std::int64_t k0 = 0; k0 < p.k; k0 += kBlockK, tile ^= 1) {
      const bool more = k0 + kBlockK < p.k;
      if (more) load_slices(p, a, b, row0, col0, k0 + kBlockK, tid, a_next, b_next);  // in flight meanwhile
      for (int k = 0; k < kBlockK; ++k) {
        T a_reg[kPerThread], b_reg[kPerThread];
        for (int i = 0; i < kPerThread; ++i) a_reg[i] = a_tile[tile][k][ty + 16 * i];
        for (int j = 0; j < kPerThread; ++j) b_reg[j] = b_tile[tile][k][tx + 16 * j];
        for (int i = 0; i < kPerThread; ++i)
          for (int j = 0; j < kPerThread; ++j) acc[i][j] += a_reg[i] * b_reg[j];
      }
      if (more) store_slices(p, tid, a_next, b_next, a_tile[tile ^ 1], b_tile[tile ^ 1]);
      __syncthreads();
    }
    for (int i = 0; i < kPerThread; ++i)
      for (int j = 0; j < kPerThread; ++j) {
        const std::int64_t r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
        if (r < p.m && c < p.n) store(at<TC>(p.c) + oc + r * p.ldc_m + c * p.ldc_n, acc[i][j], alpha, beta);
      }
  }
}

// Split K. A weight gradient (dW = dY^T X over a batch's 2,048 rows) has few tiles of c and thousands of k: on an
// H200 v3 ran chapter 12's as grids of 4 to 44 blocks for 132 multiprocessors, 400 us each, two thirds of the
// step's GEMM time. When c's tiles fill at most half the chip, K is cut into S equal slices (S a power of two up to
// 16, each slice a multiple of 32 and at least 128 long), multiplied as S batches of one launch into partial
// products (float32; float64 for float64), which split_k_sum_kernel adds in order and stores with alpha and beta.
// S follows from the shape alone, so the result is the same on every run (not the unsplit sum's to the bit).
constexpr std::int64_t kMultiprocessors = 132;  // an H100's or H200's: what "half the chip" means here

int split_k_slices(const Problem& p, int tile_m, int tile_n) {
  if (p.batches != 1) return 1;
  const std::int64_t blocks = std::int64_t{tiles(p.m, tile_m)} * tiles(p.n, tile_n);
  int s = 1;
  while (s < 16 && blocks * 2 * s <= kMultiprocessors && p.k % (2 * s * 32) == 0 && p.k / (2 * s) >= 128) s *= 2;
  return s;
}

template <class TP, class TC>
__global__ void split_k_sum_kernel(Problem p, const TP* partial, int slices, TP alpha, TP beta) {
  const std::int64_t count = p.m * p.n;
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) {
    TP sum = 0;
    for (int s = 0; s < slices; ++s) sum += partial[s * count + i];
    store(at<TC>(p.c) + i / p.n * p.ldc_m + i % p.n * p.ldc_n, sum, alpha, beta);
  }
}

// The slices as batches: a [S, m, k/S] and b [S, k/S, n] are views of a and b, c a contiguous [S, m, n] of partials.
template <class Run>
void gemm_split_k(Backend& backend, const Problem& p, DType c_dtype, double alpha, double beta, int slices, Run run) {
  const DType partial_dtype = c_dtype == DType::float64 ? DType::float64 : DType::float32;
  const std::int64_t piece = p.k / slices;
  const std::size_t bytes = static_cast<std::size_t>(slices * p.m * p.n) * element_size(partial_dtype);
  TensorDesc c{backend.allocate(bytes), partial_dtype, 3, {slices, p.m, p.n}, {p.m * p.n, p.n, 1}};
  TensorDesc a{p.a.data, p.a.dtype, 3, {slices, p.m, piece}, {piece * p.lda_k, p.lda_m, p.lda_k}};
  TensorDesc b{p.b.data, p.b.dtype, 3, {slices, piece, p.n}, {piece * p.ldb_k, p.ldb_k, p.ldb_n}};
  run(problem(c, a, b), partial_dtype);
  dispatch_gemm(c_dtype, p.a.dtype, "cuda gemm", [&](auto tc, auto tab) {
    using TC = decltype(tc);
    using TP = std::conditional_t<std::is_same_v<decltype(tab), double>, double, float>;
    launch(split_k_sum_kernel<TP, TC>, blocks_for(p.m * p.n, 256), 256u, 0, p, static_cast<const TP*>(c.data), slices,
           static_cast<TP>(alpha), static_cast<TP>(beta));
  });
  backend.deallocate(c.data, bytes);  // the cache hands it out only to work queued after ours
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
  if (gemv_fits(p)) return gemv(p, c.dtype, a.dtype, alpha, beta);
  static const bool tensor_cores = has_bf16_tensor_cores();
  if (a.dtype == DType::bfloat16 && tensor_cores) {
    const int slices = split_k_slices(p, kPipelinedTile, kPipelinedTile);
    if (slices == 1) return gemm_pipelined(p, c.dtype, alpha, beta);
    return gemm_split_k(*this, p, c.dtype, alpha, beta, slices,
                        [](const Problem& q, DType partial) { gemm_pipelined(q, partial, 1.0, 0.0); });
  }
  const int slices = split_k_slices(p, kBlockM, kBlockN);
  if (slices == 1) return gemm_register_blocked(p, c.dtype, a.dtype, alpha, beta);
  gemm_split_k(*this, p, c.dtype, alpha, beta, slices,
               [&](const Problem& q, DType partial) { gemm_register_blocked(q, partial, a.dtype, 1.0, 0.0); });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
