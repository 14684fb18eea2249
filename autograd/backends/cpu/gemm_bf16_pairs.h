#pragma once
// Pairs of bfloat16 values in one 32-bit word (k even in the low half, k odd in the high half), built with
// AVX-512BW, for the files compiled with it (gemm_avx512bf16.cpp, gemm_amx.cpp): both bfloat16 kernels multiply
// such pairs (vdpbf16ps in a register, TDPBF16PS in a tile).
#include <immintrin.h>

#include <cstdint>

#include "autograd/bfloat16.h"

namespace stepformer::cpu::gemm_detail {
namespace {

const std::uint16_t* bits(const bfloat16* p) { return &p->bits; }

// Lanes of `mask`: even[l] | odd[l] << 16 (odd null: no high halves); the other lanes zero. (The maskz forms:
// g++ 12 warns that the unmasked ones' _mm512_undefined_epi32 may be used uninitialised.)
__m512i interleave(__mmask16 mask, const std::uint16_t* even, const std::uint16_t* odd) {
  const __m512i lo = _mm512_maskz_cvtepu16_epi32(mask, _mm256_maskz_loadu_epi16(mask, even));
  if (!odd) return lo;
  const __m512i hi = _mm512_maskz_cvtepu16_epi32(mask, _mm256_maskz_loadu_epi16(mask, odd));
  return _mm512_or_si512(lo, _mm512_maskz_slli_epi32(mask, hi, 16));
}

}  // namespace
}  // namespace stepformer::cpu::gemm_detail
