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

__global__ void reset_slots_kernel(long long* slots, std::int64_t count) {
  for (std::int64_t i = global_thread(); i < count; i += grid_threads()) {
    slots[2 * i] = LLONG_MAX;
    slots[2 * i + 1] = 0;
  }
}

__global__ void find_bad_ids_kernel(const std::int64_t* ids, std::int64_t n, std::int64_t limit, bool has_allowed,
                                    std::int64_t allowed, long long* slot) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads())
    if ((ids[i] < 0 || ids[i] >= limit) && !(has_allowed && ids[i] == allowed))
      atomicMin(slot, static_cast<long long>(i));
}

__global__ void record_bad_value_kernel(const std::int64_t* ids, long long* slot) {
  if (slot[0] != LLONG_MAX) slot[1] = static_cast<long long>(ids[slot[0]]);
}

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

void CudaBackend::settle_checks(const long long* slots) {
  bool waited = false;
  for (PendingChecks& run : pending_)
    if (run.slots == slots) {
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
      launch(reset_slots_kernel, 1u, 256u, 0, slots_, static_cast<std::int64_t>(kSlots));
    }
    if (ring_used_ == kSlots) {  // every slot used since the ring was reset
      // A wait, once in kSlots checks with no copy to the host between them.
      if (!pending_.empty()) ++host_waits_;
      take_pending_checks(checks, found);
      launch(reset_slots_kernel, 1u, 256u, 0, slots_, static_cast<std::int64_t>(kSlots));
      ring_used_ = 0;
    }
    long long* slot = slots_ + 2 * ring_used_++;
    launch(find_bad_ids_kernel, blocks_for(n, 256), 256u, 0, ids, n, limit, has_allowed, allowed, slot);
    launch(record_bad_value_kernel, 1u, 1u, 0, ids, slot);
    const bool ring_run = !pending_.empty() && pending_.back().slots >= slots_ && pending_.back().slots < slot;
    if (ring_run && pending_.back().slots + 2 * pending_.back().describe.size() == slot)  // one copy reads the run
      pending_.back().describe.push_back(describe);
    else
      pending_.push_back({slot, {describe}, {}});
  }
  throw_first_bad(checks, found);  // an earlier op's, read because the ring was full
}

// A graph's checks have slots of their own, reset inside the graph before each check, so that every replay reports
// its own ids; replay_graph queues them for the next copy to the host as the ring's are.
void CudaBackend::check_indices_in_graph(Graph& graph, const std::int64_t* ids, std::int64_t n, std::int64_t limit,
                                         bool has_allowed, std::int64_t allowed, const DescribeBadIndex& describe) {
  if (graph.checks.size() == kSlots)
    throw ValueError("a graph holds at most " + std::to_string(kSlots) + " index checks (checks.cu)");
  if (graph.check_slots == nullptr) {
    const std::size_t bytes = 2 * kSlots * sizeof(long long);
    graph.check_slots = static_cast<long long*>(allocate(bytes));  // the graph's: held by no tensor
    deallocate(graph.check_slots, bytes);
  }
  long long* slot = graph.check_slots + 2 * graph.checks.size();
  launch(reset_slots_kernel, 1u, 1u, 0, slot, std::int64_t{1});
  launch(find_bad_ids_kernel, blocks_for(n, 256), 256u, 0, ids, n, limit, has_allowed, allowed, slot);
  launch(record_bad_value_kernel, 1u, 1u, 0, ids, slot);
  graph.checks.push_back(describe);
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
