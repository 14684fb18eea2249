// Runs a test program's tensors on the device named by STEPFORMER_TEST_DEVICE (cpu when unset): factories
// without an explicit device then allocate there (set_default_device), so one op suite serves every
// device. "cuda-sim forward", "cuda-sim reverse" or "cuda-sim random:SEED" also sets cuda-sim's schedule (cudasim.h). A
// device that is built but cannot run here (cuda without a GPU) makes the program exit with 4 (Catch2's "all skipped"),
// which CTest reports as skipped, with the reason printed.
#include <catch2/reporters/catch_reporter_event_listener.hpp>
#include <catch2/reporters/catch_reporter_registrars.hpp>
#include <cstdio>
#include <cstdlib>

#include <stdexcept>
#include <string>

#include "autograd/autograd.h"
#include "cudasim/cudasim.h"

namespace {

class DeviceListener : public Catch::EventListenerBase {
 public:
  using Catch::EventListenerBase::EventListenerBase;

  void testRunStarting(const Catch::TestRunInfo&) override {
    const char* name = std::getenv("STEPFORMER_TEST_DEVICE");
    if (name == nullptr || *name == '\0') return;
    std::string device_name = name;
    if (const auto space = device_name.find(' '); space != std::string::npos) {
      const std::string order = device_name.substr(space + 1);
      if (order == "forward") {
        cudasim::set_schedule(cudasim::Schedule::forward);
      } else if (order == "reverse") {
        cudasim::set_schedule(cudasim::Schedule::reverse);
      } else if (order.rfind("random:", 0) == 0 && order.size() > 7) {
        cudasim::set_schedule(cudasim::Schedule::random, std::stoull(order.substr(7)));
      } else {
        throw std::invalid_argument("STEPFORMER_TEST_DEVICE: " + device_name);
      }
      device_name.resize(space);
    }
    const stepformer::Device device = stepformer::parse_device(device_name);
    try {
      stepformer::backend_for(device);
    } catch (const stepformer::DeviceError& e) {
      std::printf("SKIPPED: the tests on %s cannot run here: %s\n", name, e.what());
      std::fflush(stdout);
      std::_Exit(4);  // what Catch2 returns when every test was skipped; catch_discover_tests maps it to "skipped"
    }
    stepformer::set_default_device(device);
    if (stepformer::ones({1}).device() != device) {  // a device run that silently ran on the CPU would prove nothing
      std::printf("STEPFORMER_TEST_DEVICE=%s: factories do not allocate there\n", name);
      std::_Exit(1);
    }
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(DeviceListener)
