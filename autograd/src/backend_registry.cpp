#include <fmt/format.h>

#include <array>
#include <atomic>
#include <string>

#include "autograd/backend.h"
#include "autograd/errors.h"

namespace stepformer {
namespace {
// One slot per device type (index 0 of each); enough until multi-GPU exists.
std::array<Backend*, 3>& registry() {
  static std::array<Backend*, 3> backends{};
  return backends;
}

// Type and index packed in one integer: a lock-free atomic everywhere (std::atomic<Device>, 8 bytes aligned
// to 4, makes clang call libatomic).
std::atomic<std::int64_t>& default_device_slot() {
  static std::atomic<std::int64_t> device{0};  // cpu:0
  return device;
}
}  // namespace

Device default_device() {
  const std::int64_t packed = default_device_slot().load();
  return Device{static_cast<DeviceType>(packed >> 32), static_cast<int>(packed & 0xffffffff)};
}
void set_default_device(Device device) {
  default_device_slot().store(static_cast<std::int64_t>(device.type) << 32 | static_cast<std::uint32_t>(device.index));
}

Device parse_device(std::string_view name) {
  std::string_view type = name;
  int index = 0;
  if (const auto colon = name.find(':'); colon != std::string_view::npos) {
    type = name.substr(0, colon);
    const std::string_view digits = name.substr(colon + 1);
    if (digits.empty() || digits.size() > 3 || digits.find_first_not_of("0123456789") != std::string_view::npos)
      throw DeviceError(fmt::format("device '{}': expected a number after ':'", name));
    index = std::stoi(std::string(digits));
  }
  for (DeviceType t : {DeviceType::cpu, DeviceType::cuda, DeviceType::cuda_sim})
    if (type == device_type_name(t)) return Device{t, index};
  throw DeviceError(fmt::format("unknown device '{}' (expected cpu, cuda or cuda-sim)", name));
}

Backend& cpu_backend();       // backends/cpu: always built
Backend& cuda_sim_backend();  // backends/cuda compiled against cudasim: always built
#if defined(STEPFORMER_WITH_CUDA)
Backend& cuda_backend();  // backends/cuda compiled by nvcc; throws DeviceError when no GPU is present
#endif

void register_backend(Device device, Backend* backend) { registry()[static_cast<std::size_t>(device.type)] = backend; }

Backend& backend_for(Device device) {
  if (device.type == DeviceType::cpu) return cpu_backend();
  if (device.type == DeviceType::cuda_sim && device.index == 0) return cuda_sim_backend();
#if defined(STEPFORMER_WITH_CUDA)
  if (device.type == DeviceType::cuda && device.index == 0) return cuda_backend();
#endif
  Backend* b = registry()[static_cast<std::size_t>(device.type)];
  if (b == nullptr || device.index != 0)
    throw DeviceError(fmt::format("device {} is not built into this stepformer", device_name(device)));
  return *b;
}

}  // namespace stepformer
