#include <fmt/format.h>

#include <array>

#include "autograd/backend.h"
#include "autograd/errors.h"

namespace stepformer {
namespace {
// One slot per device type (index 0 of each); enough until multi-GPU exists.
std::array<Backend*, 3>& registry() {
  static std::array<Backend*, 3> backends{};
  return backends;
}
}  // namespace

Backend& cpu_backend();  // backends/cpu: always built

void register_backend(Device device, Backend* backend) { registry()[static_cast<std::size_t>(device.type)] = backend; }

Backend& backend_for(Device device) {
  if (device.type == DeviceType::cpu) return cpu_backend();
  Backend* b = registry()[static_cast<std::size_t>(device.type)];
  if (b == nullptr || device.index != 0)
    throw DeviceError(fmt::format("device {} is not built into this stepformer", device_name(device)));
  return *b;
}

}  // namespace stepformer
