#pragma once
// exp for the kernels' inner loops. libm's expf is a function call per element that the compiler cannot
// vectorise; this one is branch-free arithmetic that it can, 16 lanes at a time with AVX-512. Softmax and
// cross-entropy over a 10,000-word vocabulary spend most of their time here.
//
// float: exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2] (ln 2 split in a
// high and a low part so that r is exact), exp(r) by its degree-7 Taylor polynomial (truncation error
// < 1e-8 relative), 2^n built in the exponent bits of two floats. Against std::exp: at most 1 ulp on a
// sweep of the whole float range (the test allows 2: tests/autograd/test_vmath.cpp); exp(-inf) = 0,
// exp(+inf) = inf, NaN stays NaN.
// double keeps std::exp: the float64 gradient checks want libm's accuracy, and speed there is moot.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace stepformer::cpu {

// A float kernel compiled three times, for AVX-512, for AVX2 and for any x86-64 CPU; the loader picks
// the best one this CPU runs (GCC/clang function multi-versioning). The kernel's loops are written
// once as an inline template that each version inlines. Not under ThreadSanitizer: the loader calls the
// clones' resolver before TSan's runtime is up, and the instrumented resolver crashes (clang 14, measured);
// the TSan build checks the default version of the same loops.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STEPFORMER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define STEPFORMER_TSAN 1
#endif
#if defined(__x86_64__) && !defined(__CUDACC__) && !defined(STEPFORMER_TSAN)
#define STEPFORMER_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define STEPFORMER_SIMD_CLONES
#endif

// 2^e for e in [-126, 127], from its exponent bits. The builtin is std::bit_cast's own (g++ 11, clang 9), which
// the libc++ 13 of Debian's emscripten (the WebAssembly build) does not have yet.
inline float power_of_two(std::int32_t e) { return __builtin_bit_cast(float, (e + 127) << 23); }

inline float exp_approx(float x) {
  constexpr float kMax = 88.72283f, kMin = -87.33654f;  // exp overflows above, is subnormal below
  constexpr float kRound = 12582912.f;                  // 1.5 * 2^23: adding it rounds to an integer
  const float xc = std::min(kMax, std::max(kMin, x));   // NaN -> kMin: the integer conversion stays defined
  const float n = (xc * 1.44269504f + kRound) - kRound;
  const float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;  // ln 2 = 0.693359375 - 2.12194440e-4
  float p = 1.f / 5040;
  p = p * r + 1.f / 720;
  p = p * r + 1.f / 120;
  p = p * r + 1.f / 24;
  p = p * r + 1.f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  // 2^n as two normal floats 2^h * 2^(n-h): n runs from -126 to 128, and 2^128 is not a float.
  const std::int32_t ni = static_cast<std::int32_t>(n), h = ni / 2;
  float y = p * power_of_two(h) * power_of_two(ni - h);
  // Selects, not branches, so that the loop vectorises.
  y = x < kMin ? 0.f : y;
  y = x > kMax ? INFINITY : y;
  y = x != x ? x : y;
  return y;
}

inline float exp_of(float x) { return exp_approx(x); }
inline double exp_of(double x) { return std::exp(x); }

// sum over c in [0, n) of term(c), in double. g++ 12 vectorises a float-to-double `omp simd` reduction only
// for AVX-512: in the AVX2 and default clones such a loop ran one element at a time (-fopt-info-vec-missed:
// "no vectype"; on an AVX2 CPU a quarter of the small training step was cross-entropy's scalar exp). So float
// terms are summed in float over blocks of kSumBlock (a float reduction vectorises at every width; each block
// adds at most ~kSumBlock/2 ulp of its sum, far below the tests' float32 tolerances) and the block sums in
// double, in block order: the same result on every run and for any thread count.
inline constexpr std::int64_t kSumBlock = 128;
template <class T, class Term>
[[gnu::always_inline]] inline double block_sum(std::int64_t n, Term term) {
  double total = 0;
  if constexpr (std::is_same_v<T, double>) {
#pragma omp simd reduction(+ : total)
    for (std::int64_t c = 0; c < n; ++c) total += term(c);
  } else {
    for (std::int64_t start = 0; start < n; start += kSumBlock) {
      const std::int64_t end = std::min(n, start + kSumBlock);
      float part = 0;
#pragma omp simd reduction(+ : part)
      for (std::int64_t c = start; c < end; ++c) part += term(c);
      total += part;
    }
  }
  return total;
}

}  // namespace stepformer::cpu
