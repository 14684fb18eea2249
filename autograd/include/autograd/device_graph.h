#pragma once
// A recorded sequence of a device's kernels, replayed without the host (CUDA graphs: the CUDA Programming Guide,
// "CUDA Graphs"; torch.cuda.CUDAGraph). Queueing a kernel costs the host microseconds, and a small model's step or
// generated token is dozens of small kernels: replaying them as one graph queues them with one call.
//
//   DeviceGraph graph(device, [&] { y = f(x); });  // records f's kernels; runs none of them
//   copy_(x, next_input);                          // x keeps its memory: the graph reads it there
//   graph.replay();                                // f's kernels on x's memory, into y's
//
// While recording, f runs on the host as usual (shapes, autograd's graph, which kernels to queue), but the device
// only records: a copy between host and device memory throws DeviceError (no value can be read back or sent while
// nothing runs), and every argument of every kernel is kept as it was, so a replay reads and writes the same
// memory. Inputs are filled in place before each replay (copy_), outputs are read after it. The memory the
// recording allocated stays the graph's until it is destroyed, also where its tensors have died since.
// As PyTorch asks, run f once before recording it: memory caches and one-time set-ups then happen outside the graph.
#include <cstdint>
#include <functional>

#include "autograd/device.h"

namespace stepformer {

class DeviceGraph {
 public:
  DeviceGraph(Device device, const std::function<void()>& record);  // DeviceError on a device that cannot record
  ~DeviceGraph();
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;

  void replay();  // queues the recorded kernels: one launch (kernel_launches counts 1)
  Device device() const { return device_; }

 private:
  Device device_;
  std::uint64_t id_;
};

}  // namespace stepformer
