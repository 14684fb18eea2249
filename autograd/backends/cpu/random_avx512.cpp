// Dropout's mask in AVX-512 (this file alone is compiled with -mavx512f; random.cpp calls it only on a CPU that has
// AVX-512F), with 32 x 32 -> 64-bit products (vpmuludq). The compiler's vectorisation of the scalar philox4x32_10
// widened every word to 64 bits and multiplied 64 x 64 (vpmullq) among shuffles: about 9 cycles a dropout element on a
// Zen 4, ten times a memory pass (kernel_bench, "dropout").
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "random_fill.h"

// GCC 12's intrinsics pass _mm512_undefined_epi32() (a register initialised with itself) as the merge operand they do
// not use; inlined at -O3, -Wmaybe-uninitialized reports that register. No lane of it is read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace stepformer::cpu {

namespace {

__m512i splat(std::uint64_t x) { return _mm512_set1_epi64(static_cast<long long>(x)); }

}  // namespace

// Eight Philox blocks at a time, one in each 64-bit lane: each 32-bit word of the state sits in a lane's low half.
// vpmuludq multiplies those low halves into the full 64-bit product, so a product's high word is one shift away
// and its low word needs none; whatever the high halves hold, the next round's products never read it. Element 2j
// takes words 0 and 1 of block j, element 2j + 1 words 2 and 3 (random_bits, autograd/random.h); uniform01(bits) <
// p is decided on the integers: bits >> 11 < ceil(p 2^53) (exact: p 2^53 is p scaled by a power of two).
std::int64_t dropout_mask_avx512(float* o, std::int64_t i, std::int64_t i1, double p, std::uint64_t seed,
                                 std::uint64_t offset) {
  const __m512i limit = splat(static_cast<std::uint64_t>(std::ceil(std::ldexp(p, 53))));
  const __m512i low_words = splat(0xFFFFFFFFu), m0 = splat(0xD2511F53u), m1 = splat(0xCD9E8D57u);
  __m512i k0[10], k1[10];  // the keys of the ten rounds: the same for every block
  for (std::uint32_t r = 0, a = static_cast<std::uint32_t>(seed), b = static_cast<std::uint32_t>(seed >> 32); r < 10;
       ++r, a += 0x9E3779B9u, b += 0xBB67AE85u)
    k0[r] = splat(a), k1[r] = splat(b);
  const float keep = static_cast<float>(1.0 / (1.0 - p));
  std::uint32_t keep_bits;
  std::memcpy(&keep_bits, &keep, sizeof keep);
  const __m512i keep_even = splat(keep_bits), keep_odd = splat(std::uint64_t{keep_bits} << 32);
  const __m512i lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  for (; i + 16 <= i1; i += 16, o += 16) {
    const __m512i block = _mm512_add_epi64(splat(offset / 4 + static_cast<std::uint64_t>(i) / 2), lane);
    __m512i c0 = block, c1 = _mm512_srli_epi64(block, 32), c2 = _mm512_setzero_si512(), c3 = c2;
    for (int r = 0; r < 10; ++r) {  // philox4x32_10's rounds
      const __m512i p0 = _mm512_mul_epu32(c0, m0), p1 = _mm512_mul_epu32(c2, m1);
      c0 = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), c1, k0[r], 0x96);  // a ^ b ^ c
      c2 = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), c3, k1[r], 0x96);
      c1 = p1;
      c3 = p0;
    }
    // (high << 32 | (low & 0xFFFFFFFF)) >> 11 < limit: the lanes dropped.
    const auto dropped = [&](__m512i high, __m512i low) {
      const __m512i bits = _mm512_ternarylogic_epi64(_mm512_slli_epi64(high, 32), low, low_words, 0xF8);  // a | b & c
      return _mm512_cmplt_epu64_mask(_mm512_srli_epi64(bits, 11), limit);
    };
    const __m512i even = _mm512_maskz_mov_epi64(static_cast<__mmask8>(~dropped(c0, c1)), keep_even);
    const __m512i odd = _mm512_maskz_mov_epi64(static_cast<__mmask8>(~dropped(c2, c3)), keep_odd);
    _mm512_storeu_si512(o, _mm512_or_si512(even, odd));
  }
  return i;
}

}  // namespace stepformer::cpu
