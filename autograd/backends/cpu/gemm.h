#pragma once
// The CPU GEMM on raw strided memory: C = alpha * A @ B + beta * C. The CPU backend's gemm kernel calls it;
// tests hold every micro-kernel to the reference backend, and benchmarks time them (they include this
// backend-internal header by its folder).
// How it works, loop by loop: docs/performance.md and autograd/backends/cpu/gemm.cpp.
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/bfloat16.h"

namespace stepformer::cpu {

// An operand: element (i, j) is at data[i * row_stride + j * col_stride] (any strides, including 0 and
// transposed: a column-major matrix has row_stride 1).
template <class T>
struct MatrixView {
  T* data;
  std::int64_t row_stride, col_stride;
};

// A micro-kernel computes an mr x nr tile of A @ B from packed panels (A: mr values per k, B: nr values
// per k) and writes alpha * tile + beta * C to a tile of C with unit column stride (beta == 0: C is not
// read). The block sizes say how much of A (mc x kc) and B (kc x nc) one packing step holds.
template <class T>
struct GemmKernel {
  std::string name;  // "avx512", "avx2" or "portable"
  int mr, nr;
  std::int64_t mc, kc, nc;
  void (*run)(std::int64_t k, const T* a, const T* b, T* c, std::int64_t rs_c, T alpha, T beta);
  // The same tile with A read in place: row-major, row r at a + r * lda; rows from m on repeat row m - 1 and are
  // not stored (C's rows past m are left as they are).
  void (*run_rows)(std::int64_t k, const T* a, std::int64_t lda, int m, const T* b, T* c, std::int64_t rs_c, T alpha,
                   T beta);
  // Packing in the kernel's instruction set (gemm_isa.h), or null: gemm_pack.h's loops (pack_b: its panels `ld`
  // values apart).
  void (*pack_a)(const MatrixView<const T>& a, std::int64_t i0, std::int64_t mc, std::int64_t k0, std::int64_t kc,
                 int mr, T* dst) = nullptr;
  void (*pack_b)(const MatrixView<const T>& b, std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t n,
                 int nr, T* dst, std::int64_t ld) = nullptr;
};

// The kernels this CPU can run, fastest last; gemm() uses the last one unless told otherwise.
template <class T>
const std::vector<GemmKernel<T>>& gemm_kernels();

// How gemm() cuts A's M rows into blocks of at most about mc rows for `threads` threads: a multiple of the
// thread count when there are enough mr-row panels, each block a whole number of panels (the last one
// clipped to M) and differing from the others by at most one panel. OpenMP's static schedule then hands
// every thread the same number of panels to within one.
struct RowBlocks {
  RowBlocks(std::int64_t M, int mr, std::int64_t mc, int threads);
  std::int64_t start(std::int64_t block) const;  // first row of a block; start(count) == M
  std::int64_t max_rows() const;                 // the largest block, for the packing buffer
  std::int64_t M, panels, count;
  int mr;
};

// C[M, N] = alpha * A[M, K] @ B[K, N] + beta * C, on up to `threads` OpenMP threads (0: the default
// count; 1: the caller's thread only). beta == 0 never reads C. Without an explicit kernel, products of
// at most 65,536 multiply-adds (and N <= 256) take a direct loop instead of packing, and so does an A of at
// most 4 rows (gemm_thin.h: a decode step).
// TA is the operands' type: T itself, or bfloat16 with T float (gemm.cpp). `dot_kernel` names the bfloat16 kernel
// (one of bf16_dot_kernels(); null: the fastest) and, like a named `kernel`, skips the direct and thin loops.
template <class T, class TA = T>
void gemm(std::int64_t M, std::int64_t N, std::int64_t K, T alpha, MatrixView<const TA> a, MatrixView<const TA> b,
          T beta, MatrixView<T> c, int threads = 0, const GemmKernel<T>* kernel = nullptr,
          const char* dot_kernel = nullptr);

// C[M, N] in bfloat16 = alpha * A @ B + beta * C, summed in float32 and rounded to bfloat16 once (autocast's
// products). Where a bfloat16 dot kernel takes all of K in one k block (K <= 2048), each tile is rounded as the kernel
// leaves it, so no float32 C reaches memory; otherwise the product is computed into a float32 buffer, then rounded.
// With beta == 0 the bits are those of gemm<float, bfloat16>'s product (with the same `dot_kernel`) rounded.
void gemm_rounded(std::int64_t M, std::int64_t N, std::int64_t K, float alpha, MatrixView<const bfloat16> a,
                  MatrixView<const bfloat16> b, float beta, MatrixView<bfloat16> c, int threads = 0,
                  const char* dot_kernel = nullptr);

// A product that reads A in place packs B this many bytes of packed panels at a time (gemm.cpp says why).
inline constexpr std::int64_t kInPlaceBBytes = 4 << 20;

// The bfloat16 dot-product kernels this CPU can run, fastest last: "avx512_bf16" (vdpbf16ps, AVX512_BF16) and
// "amx_bf16" (TDPBF16PS on AMX tiles), operands packed in pairs of k. bf16_dot_kernel() is the one
// gemm<float, bfloat16> uses when none is named (the last), or null: then it runs the float32 GEMM on operands
// widened a block at a time, the fallback, whose product is gemm<float, float>'s on the widened values bit for bit
// (but for an A of at most 4 rows: within rounding) (naming a float32 kernel forces it).
std::vector<std::string> bf16_dot_kernels();
const char* bf16_dot_kernel();

}  // namespace stepformer::cpu
