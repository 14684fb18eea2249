// Graphs (autograd/device_graph.h): the kernels of a function recorded once and queued again with one call.
// On a GPU this is stream capture (CUDA Programming Guide, "CUDA Graphs", "Creating a Graph Using Stream
// Capture"): while recording, launches go to a stream of our own that is being captured, not run; the captured
// graph is instantiated once and each replay is one cudaGraphLaunch on the default stream, in order with the
// kernels queued before and after it. cuda-sim keeps each launch with copies of its arguments (compat.cuh's
// `recording`) and a replay runs them in order, as the GPU would.
//
// Memory: what the recording allocates is the graph's (memory.cu's graph_blocks_). A block whose tensor dies,
// during the recording or after it, is not handed to anyone else while the graph lives, since every replay writes
// it again; the graph's release gives those back. Blocks freed during the recording are not reused within it either
// (PyTorch's private pool does reuse them; ours trades that memory for a simpler allocator).
#include <string>

#include "graph.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {
[[noreturn]] void graph_error(const std::string& what) {
  throw DeviceError(std::string(device_type_name(backend().device().type)) + ": " + what);
}
}  // namespace

std::uint64_t CudaBackend::begin_graph() {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (recording_) graph_error("a graph is already being recorded; graphs are recorded one at a time");
  auto graph = std::make_unique<Graph>();
#if defined(__CUDACC__)
  static cudaStream_t capture = [] {
    cudaStream_t s = nullptr;
    STEPFORMER_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }();
  // Relaxed: the allocator may still call cudaMalloc while recording (a new size); nothing else is called.
  STEPFORMER_CUDA_CHECK(cudaStreamBeginCapture(capture, cudaStreamCaptureModeRelaxed));
  launch_stream = capture;
#else
  recording = &graph->launches;
#endif
  recording_ = ++last_graph_;
  graphs_.emplace(recording_, std::move(graph));
  return recording_;
}

void CudaBackend::end_graph(std::uint64_t id) {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (id != recording_) graph_error("end_graph of a graph that is not being recorded");
  Graph& graph = *graphs_.at(id);
  recording_ = 0;
#if defined(__CUDACC__)
  const cudaStream_t capture = launch_stream;
  launch_stream = nullptr;
  STEPFORMER_CUDA_CHECK(cudaStreamEndCapture(capture, &graph.graph));
  STEPFORMER_CUDA_CHECK(cudaGraphInstantiate(&graph.exec, graph.graph, 0));
#else
  recording = nullptr;
#endif
  start_graph_turns(graph);
  graph.recorded = true;
}

void CudaBackend::replay_graph(std::uint64_t id) {
  Graph* graph = nullptr;
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = graphs_.find(id);
    if (it == graphs_.end() || !it->second->recorded) graph_error("replay of a graph that is not recorded");
    graph = it->second.get();
  }
  const std::lock_guard<std::mutex> lock(checks_mutex_);
  const long long* slots = graph->checks.empty() ? nullptr : graph_turn_slots(*graph);
  ++launches;
#if defined(__CUDACC__)
  STEPFORMER_CUDA_CHECK(cudaGraphLaunch(graph->exec, 0));
#else
  for (const auto& run : graph->launches) run();
#endif
  if (slots) pending_.push_back({slots, graph->checks, {}});
}

void CudaBackend::release_graph(std::uint64_t id) {
  {
    const std::lock_guard<std::mutex> lock(checks_mutex_);
    auto it = graphs_.find(id);
    if (it == graphs_.end()) return;
    settle_graph_checks(*it->second);  // read before the slots are given back
  }
  std::lock_guard<std::mutex> lock(cache_mutex_);
  std::unique_ptr<Graph> graph = std::move(graphs_.at(id));
  graphs_.erase(id);
  if (recording_ == id) {  // an error while recording (DeviceGraph ends the recording first; this is a guard)
    recording_ = 0;
#if !defined(__CUDACC__)
    recording = nullptr;
#endif
  }
#if defined(__CUDACC__)
  if (graph->exec) cudaGraphExecDestroy(graph->exec);
  if (graph->graph) cudaGraphDestroy(graph->graph);
#endif
  for (auto& [ptr, size] : graph->unheld) free_block(ptr, size);
  std::erase_if(graph_blocks_, [id](const auto& block) { return block.second == id; });  // held: freed as usual
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
