#pragma once
// Timing for the benchmarks. This machine is shared and its speed drifts by 10% within a second, so a
// comparison alternates the two contenders run by run and keeps each one's best (least disturbed) time.
#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

namespace stepformer::bench {

template <class F>
double seconds(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The best time of each of f and g, run alternately (after one warm-up run each) at least `min_runs`
// times and until `budget_s` seconds have passed.
template <class F, class G>
std::pair<double, double> best_of_alternating(F&& f, G&& g, int min_runs = 3, double budget_s = 1.0) {
  f(), g();  // warm-up: page faults, packing buffers, thread start
  double best_f = std::numeric_limits<double>::infinity(), best_g = best_f, spent = 0;
  for (int run = 0; (run < min_runs || spent < budget_s) && run < 10000; ++run) {
    const double tf = seconds(f), tg = seconds(g);
    best_f = std::min(best_f, tf);
    best_g = std::min(best_g, tg);
    spent += tf + tg;
  }
  return {best_f, best_g};
}

template <class F>
double best_seconds(F&& f, int min_runs = 3, double budget_s = 1.0) {
  return best_of_alternating(
             f, [] {}, min_runs, budget_s)
      .first;
}

}  // namespace stepformer::bench
