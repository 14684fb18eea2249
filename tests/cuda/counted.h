#pragma once
// Running a cuda-sim kernel with every check on and the profiler counting (checking build only): what the
// kernel exercises (test_kernel_exercises.cpp) and the kernel ladders (test_ladders.cpp) are held to.
#include <cstdio>
#include <functional>
#include <string>

#include "../helpers.h"
#include "cuda_backend.h"
#include "cudasim/check.h"
#include "cudasim/profile.h"

namespace stepformer::test::counted {

inline const Device kSim{DeviceType::cuda_sim, 0};

inline Tensor cpu_input(const Shape& shape, std::uint64_t seed) {
  Generator gen(seed);
  return uniform(shape, -1.0, 1.0, gen, {DType::float32, kCPU, false});
}

// Runs f with every check on under the schedule random:7 and the profiler on; returns the counters of the
// kernel whose name starts with `kernel`. A check's report ends f with CheckError, which fails the test.
inline cudasim::profile::Counters counted(const std::string& kernel, const std::function<void()>& f) {
  struct Restore {
    unsigned checks = cudasim::check::enabled();
    cudasim::Schedule schedule = cudasim::schedule();
    ~Restore() {
      cudasim::profile::enable(false);
      cudasim::check::enable(checks);
      cudasim::set_schedule(schedule);
    }
  } restore;
  cudasim::profile::take();
  cudasim::check::enable(cudasim::check::all);
  cudasim::set_schedule(cudasim::Schedule::random, 7);
  cudasim::profile::enable(true);
  f();
  for (const cudasim::profile::Counters& c : cudasim::profile::take())
    if (c.kernel.rfind(kernel, 0) == 0) {
      std::printf("%s", cudasim::profile::table({c}).c_str());  // the learner's counts, beside the targets below
      return c;
    }
  FAIL("no launch of " << kernel);
  return {};
}

inline double per_request(std::uint64_t sectors, std::uint64_t requests) {
  return requests ? static_cast<double>(sectors) / static_cast<double>(requests) : 0.0;
}

}  // namespace stepformer::test::counted
