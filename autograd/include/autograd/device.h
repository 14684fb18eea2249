#pragma once
// Where a tensor's memory lives, and so which backend runs its kernels (backend_for, autograd/backend.h):
// `cpu` (the fast CPU kernels, always built), `reference` (the plain loops every other backend is tested
// against, always built), `cuda_sim` (the CUDA kernels run on the CPU by autograd/cudasim, always built)
// and `cuda` (the same kernels on a real GPU, built when nvcc is found).
#include <cstdint>
#include <string>
#include <string_view>

namespace stepformer {

enum class DeviceType : std::uint8_t { cpu, cuda, cuda_sim, reference };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  friend bool operator==(const Device&, const Device&) = default;
};

inline constexpr Device kCPU{DeviceType::cpu, 0};

constexpr std::string_view device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::cpu: return "cpu";
    case DeviceType::cuda: return "cuda";
    case DeviceType::cuda_sim: return "cuda-sim";
    case DeviceType::reference: return "reference";
  }
  return "?";
}

inline std::string device_name(Device d) {
  std::string name(device_type_name(d.type));
  if (d.type != DeviceType::cpu) name += ":" + std::to_string(d.index);
  return name;
}

// "cpu", "cuda", "cuda-sim", "reference" (optionally ":0"); DeviceError for anything else. The device need
// not be built.
Device parse_device(std::string_view name);

// The device factories use when their Options name none (PyTorch: torch.set_default_device). Starts as
// the CPU. Tests run the op suite on another device by setting it; a demo's --device sets it.
Device default_device();
void set_default_device(Device device);

}  // namespace stepformer
