// Checks of indices (an embedding's ids, a loss's targets) whose result the host reads only at its next copy from
// the device. Reading each check's result at once would make the host wait for the device's queue to drain, twice a
// training step and once a generated token (docs/09_cuda.md, "Where the host waits"); PyTorch's CUDA kernels assert
// on the device instead, which also surfaces at a later call. Here the error is still the op's typed IndexError,
// naming the first bad position and its value; it is thrown by copy_to_host, before it copies anything.
//
// Each check owns one slot of a ring of kSlots in device memory: {first bad position (INT64_MAX: none), its
// value}. find_bad_ids_kernel lowers the position with atomicMin (one thread per index); record_bad_value_kernel,
// queued after it, copies the value while the indices are surely still alive. The slots of the checks not yet read
// are consecutive: copy_to_host reads them with one copy. The ring is reset by one kernel when it is used up.
// A recorded graph's checks use slots of its own instead (check_indices_in_graph).
#include <climits>
#include <string>
#include <vector>

#include "autograd/errors.h"
#include "cuda_backend.h"
#include "device_utils.cuh"
#include "graph.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

constexpr std::size_t kSlots = 256;
// A graph's replays write kGraphTurns blocks of kSlots in turn: the host waits to read them once in kGraphTurns
// replays (a generated token each), not before every replay.
constexpr std::size_t kGraphTurns = 16;

// Check `index`'s slot: the ring's (turn null), or in a graph the block of the replay running.
__device__ long long* slot_of(long long* slots, const std::int64_t* turn, std::int64_t index) {
  return slots + 2 * (index + (turn ? *turn * static_cast<std::int64_t>(kSlots) : 0));
}

__global__ void reset_slots_kernel(long long* slots, const std::int64_t* turn, std::int64_t first, std::int64_t count) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) {
    long long* slot = slot_of(slots, turn, first + i);
    slot[0] = LLONG_MAX;
    slot[1] = 0;
  }
}

__global__ void find_bad_ids_kernel(const std::int64_t* ids, std::int64_t n, std::int64_t limit, bool has_allowed,
                                    std::int64_t allowed, long long* slots, const std::int64_t* turn,
                                    std::int64_t index) {
  long long* slot = slot_of(slots, turn, index);
  for (std::int64_t i = global_thread(); i < n; i += grid_threads())
    if ((ids[i] < 0 || ids[i] >= limit) && !(has_allowed && ids[i] == allowed))
      atomicMin(slot, static_cast<long long>(i));
}

__global__ void record_bad_value_kernel(const std::int64_t* ids, long long* slots, const std::int64_t* turn,
                                        std::int64_t index) {
  long long* slot = slot_of(slots, turn, index);
  if (slot[0] != LLONG_MAX) slot[1] = static_cast<long long>(ids[slot[0]]);
}

// A graph's first kernel: the next block. Set to kGraphTurns - 1 before the first replay, which takes block 0.
__global__ void next_turn_kernel(std::int64_t* turn) { *turn = (*turn + 1) % static_cast<std::int64_t>(kGraphTurns); }

__global__ void set_turn_kernel(std::int64_t* turn, std::int64_t value) { *turn = value; }

void throw_first_bad(const std::vector<DescribeBadIndex>& checks, const std::vector<long long>& found) {
  for (std::size_t i = 0; i < checks.size(); ++i)
    if (found[2 * i] != LLONG_MAX)
      throw IndexError(checks[i](found[2 * i], found[2 * i + 1]) +
                       " (found on the device, reported at the next copy from it: docs/09_cuda.md)");
}
}  // namespace

void CudaBackend::take_pending_checks(std::vector<DescribeBadIndex>& checks, std::vector<long long>& found) {
  for (PendingChecks& run : pending_) {
    if (run.slots) {
      run.found.resize(2 * run.describe.size());
      read_device(run.found.data(), run.slots, run.found.size() * sizeof(long long));
    }
    checks.insert(checks.end(), run.describe.begin(), run.describe.end());
    found.insert(found.end(), run.found.begin(), run.found.end());
  }
  pending_.clear();
}

void CudaBackend::settle_checks(const long long* first, const long long* end) {
  bool waited = false;
  for (PendingChecks& run : pending_)
    if (run.slots && run.slots >= first && run.slots < end) {
      if (!waited) ++host_waits_;
      waited = true;
      run.found.resize(2 * run.describe.size());
      read_device(run.found.data(), run.slots, run.found.size() * sizeof(long long));
      run.slots = nullptr;
    }
}

void CudaBackend::check_indices(const std::int64_t* ids, std::int64_t n, std::int64_t limit, bool has_allowed,
                                std::int64_t allowed, const DescribeBadIndex& describe) {
  if (n == 0) return;
  std::vector<DescribeBadIndex> checks;
  std::vector<long long> found;
  {
    const std::lock_guard<std::mutex> lock(checks_mutex_);
    if (recording_) {
      check_indices_in_graph(*graphs_.at(recording_), ids, n, limit, has_allowed, allowed, describe);
      return;
    }
    if (slots_ == nullptr) {
      slots_ = static_cast<long long*>(allocate_for_life(2 * kSlots * sizeof(long long)));
      launch(reset_slots_kernel, 1u, 256u, 0, slots_, nullptr, std::int64_t{0}, static_cast<std::int64_t>(kSlots));
    }
    if (ring_used_ == kSlots) {  // every slot used since the ring was reset
      // A wait, once in kSlots checks with no copy to the host between them.
      if (!pending_.empty()) ++host_waits_;
      take_pending_checks(checks, found);
      launch(reset_slots_kernel, 1u, 256u, 0, slots_, nullptr, std::int64_t{0}, static_cast<std::int64_t>(kSlots));
      ring_used_ = 0;
    }
    const auto index = static_cast<std::int64_t>(ring_used_++);
    long long* slot = slots_ + 2 * index;
    launch(find_bad_ids_kernel, blocks_for(n, 256), 256u, 0, ids, n, limit, has_allowed, allowed, slots_, nullptr,
           index);
    launch(record_bad_value_kernel, 1u, 1u, 0, ids, slots_, nullptr, index);
    const bool ring_run = !pending_.empty() && pending_.back().slots >= slots_ && pending_.back().slots < slot;
    if (ring_run && pending_.back().slots + 2 * pending_.back().describe.size() == slot)  // one copy reads the run
      pending_.back().describe.push_back(describe);
    else
      pending_.push_back({slot, {describe}, {}});
  }
  throw_first_bad(checks, found);  // an earlier op's, read because the ring was full
}

// A graph's checks have slots of their own: a block per turn, reset inside the graph before each check, so that
// every replay reports its own ids; replay_graph queues each replay's block for the next copy to the host as the
// ring's are.
void CudaBackend::check_indices_in_graph(Graph& graph, const std::int64_t* ids, std::int64_t n, std::int64_t limit,
                                         bool has_allowed, std::int64_t allowed, const DescribeBadIndex& describe) {
  if (graph.checks.size() == kSlots)
    throw ValueError("a graph holds at most " + std::to_string(kSlots) + " index checks (checks.cu)");
  if (graph.check_slots == nullptr) {  // the graph's: held by no tensor
    const std::size_t bytes = kGraphTurns * 2 * kSlots * sizeof(long long) + sizeof(std::int64_t);
    graph.check_slots = static_cast<long long*>(allocate(bytes));
    deallocate(graph.check_slots, bytes);
    graph.turn = reinterpret_cast<std::int64_t*>(graph.check_slots + kGraphTurns * 2 * kSlots);
    launch(next_turn_kernel, 1u, 1u, 0, graph.turn);  // before the graph's first check
  }
  const auto index = static_cast<std::int64_t>(graph.checks.size());
  launch(reset_slots_kernel, 1u, 1u, 0, graph.check_slots, graph.turn, index, std::int64_t{1});
  launch(find_bad_ids_kernel, blocks_for(n, 256), 256u, 0, ids, n, limit, has_allowed, allowed, graph.check_slots,
         graph.turn, index);
  launch(record_bad_value_kernel, 1u, 1u, 0, ids, graph.check_slots, graph.turn, index);
  graph.checks.push_back(describe);
}

void CudaBackend::start_graph_turns(Graph& graph) {
  if (graph.turn) launch(set_turn_kernel, 1u, 1u, 0, graph.turn, static_cast<std::int64_t>(kGraphTurns - 1));
}

// The replay's block; before it is written again, the replays not yet read are read (one wait in kGraphTurns).
const long long* CudaBackend::graph_turn_slots(Graph& graph) {
  const long long* all = graph.check_slots;
  const long long* block = all + 2 * kSlots * (graph.replays++ % kGraphTurns);
  for (const PendingChecks& run : pending_)
    if (run.slots == block) {
      settle_checks(all, all + 2 * kSlots * kGraphTurns);
      break;
    }
  return block;
}

void CudaBackend::settle_graph_checks(Graph& graph) {
  if (graph.check_slots) settle_checks(graph.check_slots, graph.check_slots + 2 * kSlots * kGraphTurns);
}

void CudaBackend::report_bad_indices() {
  std::vector<DescribeBadIndex> checks;
  std::vector<long long> found;
  {
    const std::lock_guard<std::mutex> lock(checks_mutex_);
    take_pending_checks(checks, found);
  }
  throw_first_bad(checks, found);
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
