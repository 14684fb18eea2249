#include "options.h"

#include <omp.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <span>

#include "autograd/anomaly.h"
#include "autograd/backend.h"
#include "nn/safetensors.h"

namespace stepformer::demo {

std::filesystem::path write_output(const std::filesystem::path& out_dir, const std::string& name,
                                   const std::string& text) {
  std::filesystem::create_directories(out_dir);
  const std::filesystem::path path = out_dir / name;
  nn::write_file_atomically(path, std::as_bytes(std::span(text.data(), text.size())));
  std::printf("wrote %s\n", path.string().c_str());
  return path;
}

int report_error(const char* demo, const std::exception& e) {
  std::fflush(stdout);  // what the demo printed before the error comes first
  std::fprintf(stderr, "%s: %s\n", demo, e.what());
  return 1;
}

void add_common_options(CLI::App& app, CommonOptions& o, bool cpu_threads) {
  app.add_option("--out", o.out, "folder for the pictures")->capture_default_str();
  app.add_option("--seed", o.seed, "seed for the weights")->capture_default_str();
  if (cpu_threads)
    app.add_option_function<int>(
           "--threads", [](int n) { omp_set_num_threads(n); }, "CPU threads (OpenMP)")
        ->default_str("all cores")
        ->check(CLI::Range(1, 1024));
  app.add_flag_function(
      "--detect-anomaly", [](std::int64_t) { set_detect_anomaly(true); },
      "check every op's output and gradient for NaN/inf and stop at the first (slow; autograd/anomaly.h)");
  // Every tensor the demo makes without naming a device lands here: weights, data, masks.
  app.add_option_function<std::string>(
         "--device", [](const std::string& name) { set_default_device(parse_device(name)); },
         "cpu, cuda-sim (the CUDA kernels run on the CPU; slow) or cuda (a GPU; needs an nvcc build)")
      ->default_str("cpu")
      ->check([](const std::string& name) {
        try {
          backend_for(parse_device(name));  // built, and usable on this machine
          return std::string();
        } catch (const DeviceError& e) {
          return std::string(e.what());
        }
      });
}

}  // namespace stepformer::demo
