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
  // Its index checks (checks.cu): one slot each in a block of its own per turn. The replays take the kGraphTurns
  // blocks in turn (the turn counter on the device is the graph's first kernel), each writing its block again, so that
  // a replay overwrites no results the host has not read until kGraphTurns replays are unread.
  long long* check_slots = nullptr;  // kGraphTurns blocks of kCheckSlots
  std::int64_t* turn = nullptr;      // on the device: the block of the replay running
  std::size_t replays = 0;
  std::vector<DescribeBadIndex> checks;
};

}  // namespace stepformer::STEPFORMER_CUDA_NS
