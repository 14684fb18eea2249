#pragma once
// Packing's transposes in AVX-512F, for the files compiled with it (gemm_avx512.cpp, gemm_avx512bf16.cpp): a panel
// that runs across lines (a transposed B, a row-major A) is 16 lines read 16 values at a time and turned over in
// registers, where a gather fetched each value alone (gathers were half the packing's time on a Zen 4, perf).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace stepformer::cpu::gemm_detail {
namespace {

// Packing reads each operand once, in a training step mostly from memory, and the hardware's prefetchers alone kept
// it waiting: asked kPrefetchRows rows (or 128 values of a line) ahead, the weight gradients' products with operands
// from memory ran 9-35% faster on one thread of a Zen 5 in float32, 6-24% in bfloat16 (docs/performance.md, "Packing
// asks ahead"). A prefetch never faults; the callers still ask only within the operand.
constexpr std::int64_t kPrefetchRows = 16;
inline void prefetch_span(const void* p, std::int64_t bytes) {
  for (std::int64_t b = 0; b < bytes; b += 64) _mm_prefetch(static_cast<const char*>(p) + b, _MM_HINT_T0);
}

__mmask16 first_lanes(std::int64_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : count <= 0 ? __mmask16(0) : __mmask16((1u << count) - 1);
}

// r[i][j] -> r[j][i] for 16 registers of 16 32-bit values: pairs of rows interleaved by 32 then 64 bits (within
// 128-bit lanes), then the 4 x 4 blocks of 128-bit lanes turned over. (The maskz forms with every lane: g++ 12
// warns that the unmasked ones' _mm512_undefined_epi32 may be used uninitialised.)
inline void transpose16(__m512i r[16]) {
  constexpr __mmask16 kAll = 0xFFFF;
  constexpr __mmask8 kAll8 = 0xFF;
  __m512i t[16], u[16];
  for (int p = 0; p < 8; ++p) {
    t[2 * p] = _mm512_maskz_unpacklo_epi32(kAll, r[2 * p], r[2 * p + 1]);
    t[2 * p + 1] = _mm512_maskz_unpackhi_epi32(kAll, r[2 * p], r[2 * p + 1]);
  }
  // u[4q + c], lane L: rows 4q .. 4q + 3 of column 4L + c
  for (int q = 0; q < 4; ++q) {
    u[4 * q + 0] = _mm512_maskz_unpacklo_epi64(kAll8, t[4 * q], t[4 * q + 2]);
    u[4 * q + 1] = _mm512_maskz_unpackhi_epi64(kAll8, t[4 * q], t[4 * q + 2]);
    u[4 * q + 2] = _mm512_maskz_unpacklo_epi64(kAll8, t[4 * q + 1], t[4 * q + 3]);
    u[4 * q + 3] = _mm512_maskz_unpackhi_epi64(kAll8, t[4 * q + 1], t[4 * q + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i v0 = _mm512_maskz_shuffle_i32x4(kAll, u[c], u[4 + c], 0x44),
                  v1 = _mm512_maskz_shuffle_i32x4(kAll, u[c], u[4 + c], 0xEE);
    const __m512i v2 = _mm512_maskz_shuffle_i32x4(kAll, u[8 + c], u[12 + c], 0x44);
    const __m512i v3 = _mm512_maskz_shuffle_i32x4(kAll, u[8 + c], u[12 + c], 0xEE);
    r[c] = _mm512_maskz_shuffle_i32x4(kAll, v0, v2, 0x88);
    r[4 + c] = _mm512_maskz_shuffle_i32x4(kAll, v0, v2, 0xDD);
    r[8 + c] = _mm512_maskz_shuffle_i32x4(kAll, v1, v3, 0x88);
    r[12 + c] = _mm512_maskz_shuffle_i32x4(kAll, v1, v3, 0xDD);
  }
}

// dst[k * ld + l] = the 32-bit value k of line l, for k < count; line l starts at line0 + l * stride (bytes) for
// l < lines, and the lanes from `lines` on are zero. Each row of dst gets the lanes of `store`.
inline void transpose_lines(const char* line0, std::int64_t stride, std::int64_t lines, std::int64_t count,
                            std::int64_t ld, std::uint32_t* dst, __mmask16 store) {
  for (std::int64_t k = 0; k < count; k += 16) {
    const __mmask16 in = first_lanes(count - k);
    __m512i r[16];
    if (k + 128 < count)
      for (int l = 0; l < std::min<std::int64_t>(lines, 16); ++l) prefetch_span(line0 + l * stride + 4 * (k + 128), 1);
    for (int l = 0; l < 16; ++l)
      r[l] = l < lines ? _mm512_maskz_loadu_epi32(in, line0 + l * stride + 4 * k) : _mm512_setzero_si512();
    transpose16(r);
    const std::int64_t rows = std::min<std::int64_t>(16, count - k);
    for (int j = 0; j < rows; ++j) _mm512_mask_storeu_epi32(dst + (k + j) * ld, store, r[j]);
  }
}

}  // namespace
}  // namespace stepformer::cpu::gemm_detail
