// The kernel ladders from their one table of problems (tests/cuda/ladder_problems.h, the same problems
// tests/cuda/test_ladders.cpp holds to their comments): every version of every family, its answer checked
// against the CPU's, and beside it
//  - on cuda-sim in the checking build: the profiler's counts of its launch (docs/09_cuda.md, "Kernel ladders");
//  - on a GPU: its time, the best of several runs, as GB/s of the bytes the problem must move (TFLOP/s for a
//    product). A run launches the version enough times to last about 10 ms between two waits for the device.
// A version whose answer is wrong prints WRONG and makes the exit status 1.
//
//   build/cudasim-check/bin/ladder_bench                (cuda-sim's counts)
//   build/bench/bin/ladder_bench --device cuda          (a GPU's times; tools/gpu/check.sh runs it)
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>

#include "cudasim/check.h"
#include "cudasim/profile.h"
#include "device_wait.h"
#include "ladder_problems.h"
#include "timing.h"

using namespace stepformer;

namespace {

// "ok" when every element is within the problem's tolerance of the CPU's answer, else WRONG and the largest error.
std::string check(const ladders::Problem& p, const Tensor& out, bool& all_right) {
  const auto got = out.cpu().to_vector<double>(), want = p.expected.to_vector<double>();
  double worst = 0;
  bool right = got.size() == want.size();
  for (std::size_t i = 0; i < got.size() && got.size() == want.size(); ++i) {
    const double err = std::abs(got[i] - want[i]);
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
    right = right && err <= p.tolerance * (1 + std::abs(want[i]));
  }
  all_right = all_right && right;
  return right ? "ok" : fmt::format("WRONG (|error| {:.3g})", worst);
}

int run(const std::string& device) {
  const Device dev = parse_device(device);
  const std::vector<ladders::Problem> problems = ladders::problems(dev);
  const bool count = dev.type == DeviceType::cuda_sim && cudasim::check::instrumented();
  const bool time = dev.type == DeviceType::cuda;
  bool all_right = true;
  if (!count && !time)
    fmt::print("(checks only: cuda-sim counts in the checking build, build/cudasim-check/bin/ladder_bench)\n");
  for (const ladders::Problem& p : problems) {
    fmt::print("\n{}, versions {}-{}:\n", p.title, p.first, p.last);
    std::vector<cudasim::profile::Counters> counts;
    for (int v = p.first; v <= p.last; ++v) {
      const Tensor out = p.output(dev);
      if (count) {
        cudasim::profile::take();
        cudasim::profile::enable(true);
      }
      p.run(v, out);
      if (count) {
        cudasim::profile::enable(false);
        for (const auto& c : cudasim::profile::take()) counts.push_back(c);
      }
      const std::string verdict = check(p, out, all_right);
      if (!time) {
        fmt::print("  v{} {:<24} {}\n", v, p.kernel(v), verdict);
        continue;
      }
      p.run(v, out);
      bench::wait_for(out);
      const double once = bench::seconds([&] {
        p.run(v, out);
        bench::wait_for(out);
      });
      const int reps = static_cast<int>(std::clamp(0.01 / once, 1.0, 1000.0));
      const double best = bench::best_seconds([&] {
                            for (int r = 0; r < reps; ++r) p.run(v, out);
                            bench::wait_for(out);
                          }) /
                          reps;
      const std::string rate = p.flops > 0 ? fmt::format("{:7.2f} TFLOP/s", p.flops / best / 1e12)
                                           : fmt::format("{:7.1f} GB/s", p.bytes / best / 1e9);
      fmt::print("  v{} {:<24} {:<4} {:9.2f} us  {}\n", v, p.kernel(v), verdict, best * 1e6, rate);
    }
    if (count) fmt::print("{}", cudasim::profile::table(counts));
  }
  return all_right ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = "cuda-sim";
  CLI::App app{
      "ladder_bench: every version of the CUDA kernel ladders, checked, with cuda-sim's counts or a GPU's times"};
  app.add_option("--device", device, "cuda-sim (counts in the checking build) or cuda (times)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    return run(device);
  } catch (const std::exception& e) {
    fmt::print(stderr, "ladder_bench: {}\n", e.what());
    return 2;
  }
}
