// The graded tests of chapter 11 (docs/exercises.md): [ex11.1] rounding float32 to bfloat16, [ex11.2] the
// autocast rule of matmul. Each mistake the bug bank plants is named only by the check that recognises it.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>

#include "../helpers.h"

using namespace stepformer;
using stepformer::test::mistake;

namespace {
std::string hex(std::uint32_t u) { return fmt::format("0x{:08X}", u); }    // a float32's bits
std::string hex16(std::uint16_t b) { return fmt::format("0x{:04X}", b); }  // a bfloat16's
}  // namespace

TEST_CASE("ex11.1: float32 -> bfloat16 rounds to nearest, ties to even, on both signs, and keeps NaN a quiet NaN",
          "[ex11.1]") {
  // Every bfloat16 value converts to itself.
  for (std::uint32_t b = 0; b <= 0xFFFFu; ++b) {
    const float x = float_from_bits(b << 16);
    if (std::isnan(x)) continue;
    INFO("the float32 " << hex(b << 16) << " is a bfloat16 value already: its bits must come back unchanged");
    REQUIRE(bf16_bits_from_float(x) == b);
  }
  // Just above the midpoint between b and b + 1 (the dropped 16 bits are 0x8001): the nearest is b + 1.
  for (std::uint32_t b = 0; b < 0x7F80u; b += 1) {
    const std::uint32_t u = (b << 16) | 0x8001u;
    const std::uint16_t got = bf16_bits_from_float(float_from_bits(u));
    if (got == b)
      FAIL(mistake("truncation", "the dropped bits were cut off: " + hex(u) +
                                     " is nearer the bfloat16 above it, and truncation always rounds towards zero"));
    INFO("float32 " << hex(u) << " lies just above the midpoint of two bfloat16 values: it rounds up");
    REQUIRE(got == b + 1);
  }
  // Exactly the midpoint (0x8000): to the neighbour whose last bit is 0.
  for (std::uint32_t b = 0; b < 0x7F80u; b += 1) {
    const std::uint32_t u = (b << 16) | 0x8000u;
    const std::uint16_t got = bf16_bits_from_float(float_from_bits(u)), even = (b & 1u) ? b + 1 : b;
    if (got == b + 1 && even == b)
      FAIL(mistake("ties-away", "the tie " + hex(u) + " went up, away from zero; a tie goes to the even neighbour " +
                                    "(its last bit 0), so that ties go up and down equally often"));
    INFO("float32 " << hex(u) << " is a tie: it goes to the even neighbour");
    REQUIRE(got == even);
  }
  // Below zero: the magnitude rounds as above, the sign bit rides along. Every kept part, odd and even, just
  // above the midpoint and exactly at it (0xBF818000, odd, goes to 0xBF82; 0xBF808000, even, stays 0xBF80).
  for (std::uint32_t b = 0; b < 0x7F80u; b += 1)
    for (const std::uint32_t low : {0x8000u, 0x8001u, 0x7FFFu}) {
      const std::uint32_t positive = (b << 16) | low, negative = positive | 0x80000000u;
      const std::uint16_t up = bf16_bits_from_float(float_from_bits(positive));
      const std::uint16_t got = bf16_bits_from_float(float_from_bits(negative)), want = up | 0x8000u;
      if (got != want)
        FAIL(mistake("sign", "the negative " + hex(negative) + " became " + hex16(got) + ", its positive twin " +
                                 hex(positive) + " became " + hex16(up) + ": round the magnitude, then put the " +
                                 "sign back (" + hex16(want) + "); rounding must not lean towards zero or away"));
    }
  // A NaN keeps its sign and its top mantissa bits and becomes quiet (0x0040 set), as the AVX512_BF16
  // instruction vcvtneps2bf16 does, so that the kernels and this function agree bit for bit. Payloads in the
  // dropped bits only, signalling and quiet, both signs.
  for (const std::uint32_t u :
       {0x7F800001u, 0xFF800001u, 0x7F80FFFFu, 0x7FC00000u, 0xFFC00000u, 0x7FA10000u, 0xFF912345u, 0x7FFFFFFFu}) {
    const std::uint16_t got = bf16_bits_from_float(float_from_bits(u)), want = (u >> 16) | 0x0040u;
    if ((got & 0x7FFFu) == 0x7F80u)
      FAIL(mistake("nan-lost", "the NaN " + hex(u) + " became infinity: its payload was all in the dropped bits; " +
                                   "a NaN must stay a NaN (set a mantissa bit)"));
    if (got != want)
      FAIL(mistake("nan-bits", "the NaN " + hex(u) + " became " + hex16(got) + ", not " + hex16(want) +
                                   ": a NaN keeps its sign and top bits and sets the quiet bit 0x0040, "
                                   "as vcvtneps2bf16 does (a canonical 0x7FC0 loses the sign and payload)"));
  }
  // Past the largest finite bfloat16, rounding overflows to infinity.
  CHECK(bf16_bits_from_float(3.4028235e38f) == 0x7F80u);
}

TEST_CASE("ex11.2: under autocast, matmul multiplies bfloat16 copies into a float32 product", "[ex11.2]") {
  Generator gen(11);
  const Tensor a = uniform({5, 7}, -2, 2, gen, {DType::float32, default_device(), true});
  const Tensor b = uniform({7, 3}, -2, 2, gen, {DType::float32, default_device(), true});
  Tensor y;
  {
    AutocastGuard autocast(DType::bfloat16);
    y = matmul(a, b);
  }
  {
    INFO("the product stays float32: the softmax, layer norm and residual adds after it read float32");
    REQUIRE(y.dtype() == DType::float32);
  }
  const Tensor rounded =
      matmul(a.detach().to(DType::bfloat16).to(DType::float32), b.detach().to(DType::bfloat16).to(DType::float32));
  const Tensor plain = matmul(a.detach(), b.detach());
  if (test::close(y, plain, 0, 0) && !test::close(rounded, plain, 0, 0))
    FAIL(mistake("no-cast", "the product equals the float32 one: the operands were never rounded to bfloat16"));
  {
    INFO("the product is that of the operands rounded to bfloat16, summed in float32");
    REQUIRE(test::close(y, rounded, 1e-5, 1e-5));
  }
  {
    INFO("the gradient reaches the float32 operands: the cast is to(), which records itself");
    REQUIRE(y.requires_grad());
    sum(y).backward();
    REQUIRE(a.grad().defined());
    REQUIRE(b.grad().defined());
  }
  CHECK(a.grad().dtype() == DType::float32);
  // Not float32: a float64 product is not autocast's business.
  const Tensor d = uniform({2, 2}, -1, 1, gen, {DType::float64, default_device()});
  AutocastGuard autocast(DType::bfloat16);
  CHECK(matmul(d, d).dtype() == DType::float64);
}
