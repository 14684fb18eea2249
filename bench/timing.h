#pragma once
// Timing for the benchmarks. This machine is shared and its speed drifts by 10% within a second, so a
// comparison runs the contenders in turn, run by run, and keeps each one's best (least disturbed) time.
#include <algorithm>
#include <array>
#include <chrono>
#include <limits>

namespace stepformer::bench {

template <class F>
double seconds(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The best time of each contender, run in turn (after one warm-up run each) at least `min_runs` times
// and until `budget_s` seconds have passed; `before` runs untimed ahead of each timed run (gemm_bench --cold
// evicts the caches there), its seconds counted in the budget.
template <class Before, class... F>
std::array<double, sizeof...(F)> best_of_rotation_after(Before&& before, int min_runs, double budget_s, F&&... fs) {
  (fs(), ...);  // warm-up: page faults, packing buffers, thread start
  std::array<double, sizeof...(F)> best;
  best.fill(std::numeric_limits<double>::infinity());
  double spent = 0;
  for (int run = 0; (run < min_runs || spent < budget_s) && run < 10000; ++run) {
    std::size_t i = 0;
    (
        [&] {
          spent += seconds(before);
          const double t = seconds(fs);
          best[i] = std::min(best[i], t);
          spent += t;
          ++i;
        }(),
        ...);
  }
  return best;
}

template <class... F>
std::array<double, sizeof...(F)> best_of_rotation(int min_runs, double budget_s, F&&... fs) {
  return best_of_rotation_after([] {}, min_runs, budget_s, fs...);
}

template <class F>
double best_seconds(F&& f, int min_runs = 3, double budget_s = 1.0) {
  return best_of_rotation(min_runs, budget_s, f)[0];
}

}  // namespace stepformer::bench
