#pragma once
// Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3", SC 2011), the generator PyTorch's CUDA backend and JAX use.
//
// A draw is a pure function of (seed, counter): no state is carried from one element to the next, so
// element i of a random fill is the same whichever thread (or GPU thread) computes it. Each element
// uses the two 32-bit words of half a Philox block: block (offset/4 + i/2), words 2*(i%2) and +1.
// A Generator hands out offsets; every fill of n elements advances it by 2n rounded up to 4.
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define STEPFORMER_HD __host__ __device__
#else
#define STEPFORMER_HD
#endif

namespace stepformer {

struct Philox4x32 {
  std::uint32_t v[4];
};

STEPFORMER_HD inline Philox4x32 philox4x32_10(std::uint64_t counter, std::uint64_t seed) {
  std::uint32_t c0 = static_cast<std::uint32_t>(counter), c1 = static_cast<std::uint32_t>(counter >> 32);
  std::uint32_t c2 = 0, c3 = 0;
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c0;
    const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * c2;
    const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<std::uint32_t>(p1);
    c3 = static_cast<std::uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;  // the Weyl sequence that bumps the key each round
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// The 64 random bits of element `i` of a fill that starts at `offset`.
STEPFORMER_HD inline std::uint64_t random_bits(std::uint64_t seed, std::uint64_t offset, std::uint64_t i) {
  const Philox4x32 r = philox4x32_10(offset / 4 + i / 2, seed);
  const bool second = i % 2;  // words 2 and 3; selects rather than indexing, so that CPU loops vectorise
  return (std::uint64_t{second ? r.v[2] : r.v[0]} << 32) | (second ? r.v[3] : r.v[1]);
}

// Uniform in [0, 1) from 53 random bits. (A float32 caller that rounds can reach 1.0f; it clamps.)
STEPFORMER_HD inline double uniform01(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// The uniform of draw n of a run of Generator::take(1)s that starts at `offset`: each take(1) reserves one Philox
// block (4 offsets). sample_token draws at n = 0, or at n read on the device (TokenDraw, autograd/backend.h).
STEPFORMER_HD inline double token_uniform(std::uint64_t seed, std::uint64_t offset, std::int64_t n) {
  return uniform01(random_bits(seed, offset + 4 * static_cast<std::uint64_t>(n), 0));
}

// Standard normal from one element's bits by Box-Muller (cosine branch).
STEPFORMER_HD inline double standard_normal(std::uint64_t bits) {
  const double u1 = (static_cast<double>(bits >> 32) + 1.0) * 0x1.0p-32;  // (0, 1]: log is finite
  const double u2 = static_cast<double>(bits & 0xffffffffu) * 0x1.0p-32;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// A seed and the offset of the next draw.
class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : seed_(seed) {}
  std::uint64_t seed() const { return seed_; }
  std::uint64_t offset() const { return offset_; }
  void set_offset(std::uint64_t offset) { offset_ = offset; }  // for resuming a run exactly
  // Reserves the counters of an n-element fill and returns its starting offset.
  std::uint64_t take(std::uint64_t n) {
    const std::uint64_t start = offset_;
    offset_ += (2 * n + 3) / 4 * 4;
    return start;
  }

 private:
  std::uint64_t seed_;
  std::uint64_t offset_ = 0;
};

// The generator used when none is passed; manual_seed resets it (seed, offset 0).
Generator& default_generator();
void manual_seed(std::uint64_t seed);

}  // namespace stepformer
