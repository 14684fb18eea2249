// Which backend serves a device. There is no registry: the devices are a fixed list, each backend one
// instance behind a function of its own folder.
#include "autograd/backend.h"

#include <fmt/format.h>

#include "autograd/errors.h"

namespace stepformer {

Backend& cpu_backend();  // backends/cpu: always built
#if defined(STEPFORMER_WITH_CUDASIM)
Backend& cuda_sim_backend();  // backends/cuda compiled against autograd/cudasim: built but for WebAssembly
#endif
#if defined(STEPFORMER_WITH_CUDA)
Backend& cuda_backend();  // backends/cuda compiled by nvcc; throws DeviceError when no GPU is present
#endif
Backend& reference_backend();  // backends/reference: always built

namespace {
[[noreturn]] void no_graphs(const Backend& b) {
  throw DeviceError(fmt::format("{}: graphs record CUDA kernels; make this device's work on cuda or cuda-sim",
                                device_name(b.device())));
}
}  // namespace
std::uint64_t Backend::begin_graph() { no_graphs(*this); }
void Backend::end_graph(std::uint64_t) { no_graphs(*this); }
void Backend::replay_graph(std::uint64_t) { no_graphs(*this); }
void Backend::release_graph(std::uint64_t) { no_graphs(*this); }

Backend& backend_for(Device device) {
  if (device.index == 0) switch (device.type) {
      case DeviceType::cpu: return cpu_backend();
      case DeviceType::cuda_sim:
#if defined(STEPFORMER_WITH_CUDASIM)
        return cuda_sim_backend();
#else
        break;
#endif
      case DeviceType::reference: return reference_backend();
      case DeviceType::cuda:
#if defined(STEPFORMER_WITH_CUDA)
        return cuda_backend();
#else
        break;
#endif
    }
  throw DeviceError(fmt::format("device {} is not built into this stepformer", device_name(device)));
}

}  // namespace stepformer
