#include "cpu/peak.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <vector>

#include "gemm.h"

namespace stepformer::cpu {

double peak_flops(int threads) {
  if (threads <= 0) threads = omp_get_max_threads();
  static std::mutex mutex;
  static std::map<int, double> measured;
  const std::lock_guard lock(mutex);
  if (const auto it = measured.find(threads); it != measured.end()) return it->second;

  const auto& kernel = gemm_kernels<float>().back();
  const std::int64_t k = 256;  // 256 x (mr + nr) floats: both panels fit in L1
  const int calls = 10000;     // ~5 ms per round at 100 GFLOP/s
  double best = 1e30;
  for (int round = 0; round < 20; ++round) {  // the best round: the least disturbed by other processes
    const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
    {
      std::vector<float> a(static_cast<std::size_t>(k * kernel.mr), 0.5f),
          b(static_cast<std::size_t>(k * kernel.nr), 0.25f), c(static_cast<std::size_t>(kernel.mr * kernel.nr));
      for (int i = 0; i < calls; ++i) kernel.run(k, a.data(), b.data(), c.data(), kernel.nr, 1.f, i ? 1.f : 0.f);
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double flops = 2.0 * static_cast<double>(k * kernel.mr * kernel.nr) * calls * threads / best;
  return measured[threads] = flops;
}

bool has_avx512_bf16() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

double bf16_peak_flops(int threads) { return (has_avx512_bf16() ? 2.0 : 1.0) * peak_flops(threads); }

}  // namespace stepformer::cpu
