// The bfloat16 micro-kernel on AVX512_BF16 (this file alone is compiled with -mavx512bf16; gemm.cpp calls it
// only on a CPU that has the instruction). vdpbf16ps (_mm512_dpbf16_ps) takes 32 bfloat16 values from each
// operand and adds, to each of 16 float32 lanes, the products of one pair: c[i] += a[2i] b[2i] + a[2i+1] b[2i+1].
// That is twice the multiply-adds of a float32 FMA per instruction, with float32 accumulation. So A and B are
// packed with pairs of k side by side (gemm.cpp's pack_pairs): a register of B holds 16 columns' pairs, and
// one 32-bit broadcast of A holds a row's pair. The tile is the float32 kernel's, 14 x 32 (28 accumulators).
// Intel's definition (SDM, VDPBF16PS) treats denormal inputs as zero and flushes denormal results: the
// products of bfloat16 values are exact in float32, so the results differ from the float32 kernel's on
// widened operands only by the order of the two additions and by those flushes.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "gemm_isa.h"

namespace stepformer::cpu::gemm_detail {
namespace {

// Where row r's pair k is: packed, a[k * MR + r]; in place, rows[r][k] (two bfloat16 values, one 32-bit load).
template <int MR>
struct Packed {
  const std::uint32_t* a;
  std::uint32_t pair(int r, std::int64_t k) const { return a[k * MR + r]; }
};
template <int MR>
struct InPlace {
  const std::uint16_t* rows[MR];
  std::uint32_t pair(int r, std::int64_t k) const {
    std::uint32_t word;
    std::memcpy(&word, rows[r] + 2 * k, sizeof word);
    return word;
  }
};

template <int MR, int NV, class A>
void dot_tile(std::int64_t kp, const A& a, const std::uint32_t* b, float* c, std::int64_t rs_c, float alpha,
              float beta) {
  constexpr int NR = NV * 16;
  for (int r = 0; r < MR; ++r) __builtin_prefetch(c + r * rs_c, 1), __builtin_prefetch(c + r * rs_c + NR - 1, 1);
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (std::int64_t k = 0; k < kp; ++k, b += NR) {
    __m512bh bk[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bk[v] = (__m512bh)_mm512_loadu_si512(b + v * 16);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(a.pair(r, k)));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], ar, bk[v]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* p = c + r * rs_c + v * 16;
      const __m512 scaled = _mm512_mul_ps(acc[r][v], va);
      _mm512_storeu_ps(p, beta == 0 ? scaled : _mm512_fmadd_ps(_mm512_loadu_ps(p), vb, scaled));
    }
}

template <int MR, int NV>
void dot_kernel(std::int64_t kp, const std::uint32_t* a, const std::uint32_t* b, float* c, std::int64_t rs_c,
                float alpha, float beta) {
  dot_tile<MR, NV>(kp, Packed<MR>{a}, b, c, rs_c, alpha, beta);
}

template <int MR, int NV>
void dot_kernel_rows(std::int64_t kp, const std::uint16_t* a, std::int64_t lda, int m, const std::uint32_t* b, float* c,
                     std::int64_t rs_c, float alpha, float beta) {
  InPlace<MR> rows;
  for (int r = 0; r < MR; ++r) rows.rows[r] = a + std::min(r, m - 1) * lda;
  dot_tile<MR, NV>(kp, rows, b, c, rs_c, alpha, beta);
}

}  // namespace

MicroKernelBf16 avx512_bf16() { return {"avx512_bf16", 14, 32, &dot_kernel<14, 2>, &dot_kernel_rows<14, 2>}; }

}  // namespace stepformer::cpu::gemm_detail
