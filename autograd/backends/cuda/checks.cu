// Checks of indices (an embedding's ids, a loss's targets) whose result the host reads only at its next copy from
// the device. Reading each check's result at once would make the host wait for the device's queue to drain, twice a
// training step and once a generated token (docs/09_cuda.md, "Where the host waits"); PyTorch's CUDA kernels assert
// on the device instead, which also surfaces at a later call. Here the error is still the op's typed IndexError,
// naming the first bad position and its value; it is thrown by copy_to_host, before it copies anything.
//
// Each check owns one slot of a ring of kCheckSlots in device memory: {first bad position (LLONG_MAX: none), its
// value}, written whole by one block (check_ids_in_block, checks.cuh): block 0 of the kernel that reads the ids, or
// check_ids_kernel's one block. The slots of the checks not yet read are consecutive: copy_to_host reads them with
// one copy. A recorded graph's checks use slots of its own instead, a block of them per turn.
#include <string>
#include <vector>

#include "autograd/errors.h"
#include "checks.cuh"
#include "cuda_backend.h"
#include "device_utils.cuh"
#include "graph.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

// A graph's replays write kGraphTurns blocks of kCheckSlots in turn: the host waits to read them once in kGraphTurns
// replays (a generated token each), not before every replay.
constexpr std::size_t kGraphTurns = 16;

__global__ void check_ids_kernel(IdCheck check) { check_ids_in_block(check); }

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
  queue_index_check({ids, n, limit, has_allowed, allowed, nullptr, nullptr, 0}, describe,
                    [&](const IdCheck& check) { launch(check_ids_kernel, 1u, 256u, 0, check); });
}

void CudaBackend::queue_index_check(IdCheck check, const DescribeBadIndex& describe,
                                    const std::function<void(const IdCheck&)>& launch_checking) {
  std::vector<DescribeBadIndex> checks;
  std::vector<long long> found;
  {
    // Held while the kernel is queued: a copy to the host from another thread then reads the slot only after it.
    const std::lock_guard<std::mutex> lock(checks_mutex_);
    if (recording_) {
      check_in_graph(*graphs_.at(recording_), check, describe, launch_checking);
      return;
    }
    if (slots_ == nullptr) slots_ = static_cast<long long*>(allocate_for_life(2 * kCheckSlots * sizeof(long long)));
    if (ring_used_ == kCheckSlots) {  // every slot used since the ring was last read whole
      // A wait, once in kCheckSlots checks with no copy to the host between them.
      if (!pending_.empty()) ++host_waits_;
      take_pending_checks(checks, found);
      ring_used_ = 0;
    }
    check.slots = slots_;
    check.index = static_cast<std::int64_t>(ring_used_++);
    long long* slot = slots_ + 2 * check.index;
    launch_checking(check);
    const bool ring_run = !pending_.empty() && pending_.back().slots >= slots_ && pending_.back().slots < slot;
    if (ring_run && pending_.back().slots + 2 * pending_.back().describe.size() == slot)  // one copy reads the run
      pending_.back().describe.push_back(describe);
    else
      pending_.push_back({slot, {describe}, {}});
  }
  throw_first_bad(checks, found);  // an earlier op's, read because the ring was full
}

// A graph's checks have slots of their own: a block per turn, written again by each replay, so that every replay
// reports its own ids; replay_graph queues each replay's block for the next copy to the host as the ring's are.
void CudaBackend::check_in_graph(Graph& graph, IdCheck check, const DescribeBadIndex& describe,
                                 const std::function<void(const IdCheck&)>& launch_checking) {
  if (graph.checks.size() == kCheckSlots)
    throw ValueError("a graph holds at most " + std::to_string(kCheckSlots) + " index checks (checks.cu)");
  if (graph.check_slots == nullptr) {  // the graph's: held by no tensor
    const std::size_t bytes = kGraphTurns * 2 * kCheckSlots * sizeof(long long) + sizeof(std::int64_t);
    graph.check_slots = static_cast<long long*>(allocate(bytes));
    deallocate(graph.check_slots, bytes);
    graph.turn = reinterpret_cast<std::int64_t*>(graph.check_slots + kGraphTurns * 2 * kCheckSlots);
    launch(next_turn_kernel, 1u, 1u, 0, graph.turn);  // before the graph's first check
  }
  check.slots = graph.check_slots;
  check.turn = graph.turn;
  check.index = static_cast<std::int64_t>(graph.checks.size());
  launch_checking(check);
  graph.checks.push_back(describe);
}

void CudaBackend::start_graph_turns(Graph& graph) {
  if (graph.turn) launch(set_turn_kernel, 1u, 1u, 0, graph.turn, static_cast<std::int64_t>(kGraphTurns - 1));
}

// The replay's block; before it is written again, the replays not yet read are read (one wait in kGraphTurns).
const long long* CudaBackend::graph_turn_slots(Graph& graph) {
  const long long* all = graph.check_slots;
  const long long* block = all + 2 * kCheckSlots * (graph.replays++ % kGraphTurns);
  for (const PendingChecks& run : pending_)
    if (run.slots == block) {
      settle_checks(all, all + 2 * kCheckSlots * kGraphTurns);
      break;
    }
  return block;
}

void CudaBackend::settle_graph_checks(Graph& graph) {
  if (graph.check_slots) settle_checks(graph.check_slots, graph.check_slots + 2 * kCheckSlots * kGraphTurns);
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
