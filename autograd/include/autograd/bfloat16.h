#pragma once
// bfloat16, the "brain floating point" format: the top 16 bits of a float32 (1 sign, 8 exponent, 7 mantissa
// bits). Same range as float32, 8 significant bits instead of 24. It is a storage type here, as on CPUs and
// in PyTorch: arithmetic happens in float32, and only the stored result is rounded to bfloat16.
//
// float32 -> bfloat16 rounds to nearest, ties to even (what PyTorch's c10::BFloat16 and CUDA's
// __float2bfloat16 do), and a value past the largest bfloat16 rounds to infinity. A NaN keeps its sign and
// top bits and becomes quiet (0x0040 set), as the AVX512_BF16 instruction vcvtneps2bf16 does, so that our
// kernels and this function agree bit for bit; c10::BFloat16 returns 0x7FC0 for every NaN instead.
// bfloat16 -> float32 is exact: append 16 zero bits.
// Under nvcc the functions are __host__ __device__, so the CUDA kernels share them.
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define STEPFORMER_BF16_FN __host__ __device__ inline
#else
#define STEPFORMER_BF16_FN inline
#endif

namespace stepformer {

STEPFORMER_BF16_FN std::uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}

STEPFORMER_BF16_FN float float_from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, 4);
  return x;
#endif
}

// Round to nearest even in integer arithmetic: add 0x7FFF plus the lowest kept bit, then cut. The
// carry out of the 16 dropped bits happens exactly when they are above half, or at half with the kept
// part odd. A carry into the exponent is right too: it is the next binade, or infinity past the largest.
STEPFORMER_BF16_FN std::uint16_t bf16_bits_from_float(float x) {
  // EXERCISE 11.1: x's top 16 bits rounded to nearest, ties to even; a NaN keeps them, quiet bit 0x0040 set
  const std::uint32_t u = float_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // NaN: keep it quiet
  const std::uint32_t lsb = (u >> 16) & 1u;
  return static_cast<std::uint16_t>((u + 0x7FFFu + lsb) >> 16);
  // END EXERCISE
}

STEPFORMER_BF16_FN float float_from_bf16_bits(std::uint16_t b) { return float_from_bits(std::uint32_t{b} << 16); }

// The element type of DType::bfloat16. Conversions are explicit both ways, so that no expression
// computes in bfloat16 by accident: static_cast<float>(b), bfloat16(x).
struct bfloat16 {
  std::uint16_t bits = 0;

  bfloat16() = default;
  STEPFORMER_BF16_FN explicit bfloat16(float x) : bits(bf16_bits_from_float(x)) {}
  // Other arithmetic types go through float32, as c10::BFloat16's constructor does (so a double is
  // rounded twice; bfloat16(double) is used for fills and host values only, never in a kernel's math).
  template <class U>
  STEPFORMER_BF16_FN explicit bfloat16(U x) : bfloat16(static_cast<float>(x)) {}

  STEPFORMER_BF16_FN explicit operator float() const { return float_from_bf16_bits(bits); }
  template <class U>
  STEPFORMER_BF16_FN explicit operator U() const {
    return static_cast<U>(float_from_bf16_bits(bits));
  }

  STEPFORMER_BF16_FN static bfloat16 from_bits(std::uint16_t b) {
    bfloat16 r;
    r.bits = b;
    return r;
  }
};

static_assert(sizeof(bfloat16) == 2, "bfloat16 is two bytes, as in memory and in safetensors");

}  // namespace stepformer
