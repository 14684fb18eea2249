#include "autograd/device_graph.h"

#include "autograd/backend.h"

namespace stepformer {

DeviceGraph::DeviceGraph(Device device, const std::function<void()>& record)
    : device_(device), id_(backend_for(device).begin_graph()) {
  Backend& b = backend_for(device_);
  try {
    record();
  } catch (...) {
    b.end_graph(id_);  // the device records no more; what was recorded is dropped with its memory
    b.release_graph(id_);
    throw;
  }
  b.end_graph(id_);
}

DeviceGraph::~DeviceGraph() { backend_for(device_).release_graph(id_); }

void DeviceGraph::replay() { backend_for(device_).replay_graph(id_); }

}  // namespace stepformer
