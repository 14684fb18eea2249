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

#include "gemm_avx512_transpose.h"
#include "gemm_bf16_pairs.h"
#include "gemm_isa.h"
#include "gemm_pack.h"

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

// Packing, the same words as gemm_pack.h's loops (which the compiler leaves scalar or 8 lanes wide; they were
// 8% of the language model's bf16 step, docs/performance.md). Two layouts of an operand are common:
// - the pairs' two values a whole row apart (B row-major, A column-major): two rows of 16 values, widened to
//   32-bit lanes, the odd row shifted into the high halves;
// - the pairs side by side (B transposed, A row-major): each word is one 32-bit value of its line, so the panel
//   is 16 lines transposed 16 x 16 words at a time (gemm_avx512_transpose.h). An odd k's last pair reads only
//   its even half (its odd half may lie past the operand's end).
// Anything else takes the portable loop.

// dst[q * ld + l] = the pair (2q, 2q + 1) of line l, which starts at line0 + l * stride, for l < lines (the other
// lanes zero); each row of dst gets the lanes of `store`.
void transpose_pairs(const std::uint16_t* line0, std::int64_t stride, std::int64_t lines, std::int64_t kc,
                     std::int64_t ld, std::uint32_t* dst, __mmask16 store) {
  const std::int64_t full = kc / 2;
  transpose_lines(reinterpret_cast<const char*>(line0), stride * 2, lines, full, ld, dst, store);
  if (kc % 2 == 0) return;
  alignas(64) std::uint32_t last[16] = {};
  for (std::int64_t l = 0; l < std::min<std::int64_t>(lines, 16); ++l) last[l] = line0[l * stride + kc - 1];
  _mm512_mask_storeu_epi32(dst + full * ld, store, _mm512_load_si512(last));
}

void pack_b_pairs_avx512(const MatrixView<const bfloat16>& b, std::int64_t k0, std::int64_t kc, std::int64_t j0,
                         std::int64_t n, int nr, std::uint32_t* dst) {
  if (nr % 16 != 0) return pack_b_pairs(b, k0, kc, j0, n, nr, dst);
  if (b.col_stride == 1) {
    for (std::int64_t k = 0; k < kc; k += 2, dst += nr) {
      const std::uint16_t* even = bits(b.data + (k0 + k) * b.row_stride + j0);
      const std::uint16_t* odd = k + 1 < kc ? even + b.row_stride : nullptr;
      if (k + kPrefetchRows + 1 < kc)
        for (int row = 0; row < 2; ++row) prefetch_span(even + (kPrefetchRows + row) * b.row_stride, n * 2);
      for (int j = 0; j < nr; j += 16)
        _mm512_storeu_si512(dst + j, interleave(first_lanes(n - j), even + j, odd ? odd + j : nullptr));
    }
    return;
  }
  if (b.row_stride == 1) {
    for (int j = 0; j < nr; j += 16)
      transpose_pairs(bits(b.data + k0 + (j0 + j) * b.col_stride), b.col_stride, n - j, kc, nr, dst + j, 0xFFFF);
    return;
  }
  pack_b_pairs(b, k0, kc, j0, n, nr, dst);
}

void pack_a_pairs_avx512(const MatrixView<const bfloat16>& a, std::int64_t i0, std::int64_t mc, std::int64_t k0,
                         std::int64_t kc, int mr, std::uint32_t* dst) {
  const bool column_major = a.row_stride == 1, row_major = a.col_stride == 1;
  if (mr > 16 || !(column_major || row_major)) return pack_a_pairs(a, i0, mc, k0, kc, mr, dst);
  const std::int64_t kp = (kc + 1) / 2;
  const __mmask16 store = first_lanes(mr);
  if (row_major) {
    for (std::int64_t ip = 0; ip < mc; ip += mr, dst += kp * mr)
      transpose_pairs(bits(a.data + (i0 + ip) * a.row_stride + k0), a.row_stride, std::min<std::int64_t>(mr, mc - ip),
                      kc, mr, dst, store);
    return;
  }
  // Column-major: the block's mc rows at one k are neighbours, so each pair of k is read once for every panel
  // (panel by panel, the k loop's 2048 lines fell out of L1 before the next panel came back to them).
  for (std::int64_t q = 0; q < kp; ++q) {
    const std::uint16_t* even = bits(a.data + i0 + (k0 + 2 * q) * a.col_stride);
    const std::uint16_t* odd = 2 * q + 1 < kc ? even + a.col_stride : nullptr;
    if (2 * q + kPrefetchRows + 1 < kc)
      for (int row = 0; row < 2; ++row) prefetch_span(even + (kPrefetchRows + row) * a.col_stride, mc * 2);
    for (std::int64_t ip = 0; ip < mc; ip += mr)
      _mm512_mask_storeu_epi32(
          dst + ip * kp + q * mr, store,
          interleave(first_lanes(std::min<std::int64_t>(mr, mc - ip)), even + ip, odd ? odd + ip : nullptr));
  }
}

}  // namespace

MicroKernelBf16 avx512_bf16() {
  return {"avx512_bf16",       14, 32, &dot_kernel<14, 2>, &dot_kernel_rows<14, 2>, &pack_a_pairs_avx512,
          &pack_b_pairs_avx512};
}

}  // namespace stepformer::cpu::gemm_detail
