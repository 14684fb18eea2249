#include "cpu/peak.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>

#include "aligned.h"
#include "gemm.h"
#include "gemm_isa.h"

namespace stepformer::cpu {
namespace {

// The best of 20 rounds (the least disturbed by other processes) of `calls` runs of a micro-kernel per thread, on
// panels for k = 256 (both fit in L1); begin() is the kernel's per-thread set-up. FLOP/s of all threads together.
// Rounds stop after one second once three are done: an optimised build runs all 20 in a fraction of it; under
// AddressSanitizer, which checks every load of the micro-kernel, 20 rounds took 20 s of chapter 07's 33 s demo.
template <class Panel, class Run, class Begin>
double measure(int threads, int mr, int nr, std::int64_t k_per_call, std::int64_t a_size, std::int64_t b_size,
               Panel value, Run run, Begin begin) {
  const double flops_per_call = 2.0 * mr * nr * static_cast<double>(k_per_call);
  const int calls = static_cast<int>(std::max(1000.0, 2e9 / flops_per_call));  // a few ms per round
  double best = 1e30;
  const auto first = std::chrono::steady_clock::now();
  for (int round = 0; round < 20; ++round) {
    const auto start = std::chrono::steady_clock::now();
    if (round >= 3 && start - first > std::chrono::seconds(1)) break;
#pragma omp parallel num_threads(threads)
    {
      begin();
      // Aligned as the GEMM's packed panels are (AMX runs at a third of its speed on rows that straddle lines).
      const AlignedArray<Panel> a = aligned_array<Panel>(static_cast<std::size_t>(a_size)),
                                b = aligned_array<Panel>(static_cast<std::size_t>(b_size));
      std::fill(a.get(), a.get() + a_size, value);
      std::fill(b.get(), b.get() + b_size, value);
      const AlignedArray<float> c = aligned_array<float>(static_cast<std::size_t>(mr * nr));
      for (int i = 0; i < calls; ++i) run(a.get(), b.get(), c.get(), i ? 1.f : 0.f);
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return flops_per_call * calls * threads / best;
}

// Measured once per thread count and kept: later calls return the first measurement.
template <class Measure>
double once(std::map<int, double>& measured, int threads, Measure m) {
  if (threads <= 0) threads = omp_get_max_threads();
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  if (const auto it = measured.find(threads); it != measured.end()) return it->second;
  return measured[threads] = m(threads);
}

constexpr std::int64_t kK = 256;

}  // namespace

double peak_flops(int threads) {
  static std::map<int, double> measured;
  return once(measured, threads, [](int t) {
    const auto& kernel = gemm_kernels<float>().back();
    return measure(
        t, kernel.mr, kernel.nr, kK, kK * kernel.mr, kK * kernel.nr, 0.5f,
        [&](const float* a, const float* b, float* c, float beta) { kernel.run(kK, a, b, c, kernel.nr, 1.f, beta); },
        [] {});
  });
}

const char* bf16_peak_kernel() {
  const auto& dots = gemm_detail::bf16_dots();
  return dots.empty() ? "float32" : dots.back().name;
}

double bf16_peak_flops(int threads) {
  const auto& dots = gemm_detail::bf16_dots();
  if (dots.empty()) return peak_flops(threads);
  const gemm_detail::MicroKernelBf16* dot = &dots.back();
  static std::map<int, double> measured;
  return once(measured, threads, [dot](int t) {
    const std::int64_t kp = kK / 2;  // pairs of k: a multiple of every kernel's step
    return measure(
        t, dot->mr, dot->nr, kK, kp * dot->mr, kp * dot->nr, std::uint32_t{0x3F003F00},  // pairs of 0.5
        [&](const std::uint32_t* a, const std::uint32_t* b, float* c, float beta) {
          dot->run(kp, a, b, c, dot->nr, 1.f, beta);
        },
        [dot] {
          if (dot->begin) dot->begin();
        });
  });
}

}  // namespace stepformer::cpu
