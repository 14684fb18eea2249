#include "autograd/device.h"

#include <fmt/format.h>

#include <atomic>

#include "autograd/errors.h"

namespace stepformer {

namespace {
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
  for (DeviceType t : {DeviceType::cpu, DeviceType::cuda, DeviceType::cuda_sim, DeviceType::reference})
    if (type == device_type_name(t)) return Device{t, index};
  throw DeviceError(fmt::format("unknown device '{}' (expected cpu, cuda, cuda-sim or reference)", name));
}

}  // namespace stepformer
