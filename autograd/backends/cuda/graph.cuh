#pragma once
// What the backend keeps of a recorded graph (graph.cu records and replays it; memory.cu and checks.cu keep its
// memory and its index checks).
#include <functional>
#include <utility>
#include <vector>

#include "compat.cuh"
#include "cuda_backend.h"

namespace stepformer::STEPFORMER_CUDA_NS {

struct CudaBackend::Graph {
#if defined(__CUDACC__)
  cudaGraph_t graph = nullptr;  // stream capture's result
  cudaGraphExec_t exec = nullptr;
#else
  std::vector<std::function<void()>> launches;  // compat.cuh's `recording`: each launch with its arguments
#endif
  bool recorded = false;  // end_graph has run: no more launches, replays allowed
  // Its blocks that no tensor holds any more (a temporary of the recording, or an output since dropped): a replay
  // writes them again, so they go back to the cache only when the graph is released.
  std::vector<std::pair<void*, std::size_t>> unheld;
  // Its index checks (checks.cu): one slot each in its own block, reset and refilled by every replay.
  long long* check_slots = nullptr;
  std::vector<DescribeBadIndex> checks;
};

}  // namespace stepformer::STEPFORMER_CUDA_NS
