#pragma once
// The CUDA backend: every kernel of the Backend interface as a CUDA kernel plus the host code that picks
// its launch configuration. One file per kernel family, named as in backends/cpu/. Compiled twice:
// by nvcc as the `cuda` device and by g++ against cuda-sim as the `cuda-sim` device (compat.cuh).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "autograd/backend.h"

namespace stepformer::STEPFORMER_CUDA_NS {

struct IdCheck;  // checks.cuh

class CudaBackend final : public Backend {
 public:
  Device device() const override;

  STEPFORMER_BACKEND_KERNELS
  std::size_t bytes_in_use() const override { return bytes_in_use_.load(); }
  std::size_t host_waits() const override { return host_waits_.load(); }
  std::size_t kernel_launches() const override;  // memory.cu
  std::size_t driver_allocations() const override { return driver_allocations_.load(); }
  // graph.cu: recording (a kernel list on cuda-sim, stream capture on a GPU) and replaying; the graph's own memory
  // (memory.cu) and index checks (checks.cu) are kept here.
  std::uint64_t begin_graph() override;
  void end_graph(std::uint64_t id) override;
  void replay_graph(std::uint64_t id) override;
  void release_graph(std::uint64_t id) override;
  // optim.cu: one launch per 16 parameters, the tensors' addresses passed in the launch's arguments.
  void adam_update_many(const std::vector<AdamTensors>& group, const AdamConfig& cfg) override;
  // reduce.cu: per 16 tensors, a block per chunk of 4,096 elements, then a warp per tensor adds its chunks in order.
  bool sum_squares_many(const TensorDesc& out, const std::vector<TensorDesc>& tensors) override;
  // optim.cu: one launch per 16 tensors, as adam_update_many.
  bool scale_many(const std::vector<TensorDesc>& tensors, const TensorDesc& factor) override;

  // transpose.cu: a copy into a contiguous `out` from an `in` whose last two dimensions are swapped in
  // memory, through shared-memory tiles; false (nothing done) for any other layout.
  bool transpose_copy(const TensorDesc& out, const TensorDesc& in);
  // attention_tensor_cores.cu: attention_forward for bfloat16 operands on the tensor cores (heads of Dh == Dv in
  // {16, 32, 64, 128}, 16-byte aligned operands, a GPU with them or cuda-sim); false (nothing done) otherwise.
  bool attention_forward_tensor_cores(const TensorDesc& out, const TensorDesc& lse, const TensorDesc& q,
                                      const TensorDesc& k, const TensorDesc& v, const TensorDesc& blocked,
                                      const AttentionConfig& cfg);
  // attention_tensor_cores.cu: attention_backward on the tensor cores for the same heads; false otherwise.
  bool attention_backward_tensor_cores(const TensorDesc& dq, const TensorDesc& dk, const TensorDesc& dv,
                                       const TensorDesc& dout, const TensorDesc& q, const TensorDesc& k,
                                       const TensorDesc& v, const TensorDesc& out, const TensorDesc& lse,
                                       const TensorDesc& blocked, const AttentionConfig& cfg);
  // checks.cu: queues a check of ids[0, n) against [0, limit) (`allowed` passes too, where has_allowed) whose result
  // the host reads at its next copy from the device (copy_to_host), which then throws IndexError(describe(first bad
  // position, its value)). Checks report in the order they were queued. One kernel of one block.
  void check_indices(const std::int64_t* ids, std::int64_t n, std::int64_t limit, bool has_allowed,
                     std::int64_t allowed, const DescribeBadIndex& describe);
  // checks.cu: the same check run by the kernel that `launch_checking` queues, whose block 0 calls
  // check_ids_in_block(check) (checks.cuh) with the check it is given (its slot filled in): no launch of its own.
  void queue_index_check(IdCheck check, const DescribeBadIndex& describe,
                         const std::function<void(const IdCheck&)>& launch_checking);

 private:
  struct Graph;  // graph.cu

  void report_bad_indices();  // checks.cu: reads the checks not yet read; throws for the first that found one
  void take_pending_checks(std::vector<DescribeBadIndex>& checks, std::vector<long long>& found);  // checks_mutex_ held
  // checks.cu: reads now the pending checks whose slots lie in [first, end) (checks_mutex_ held)
  void settle_checks(const long long* first, const long long* end);
  void start_graph_turns(Graph& graph);  // checks.cu: before a recorded graph's first replay
  // checks.cu (checks_mutex_ held): the slots the next replay's checks write, having read them if still unread
  const long long* graph_turn_slots(Graph& graph);
  void settle_graph_checks(Graph& graph);  // checks.cu: reads all its replays' unread checks now
  void check_in_graph(Graph& graph, IdCheck check, const DescribeBadIndex& describe,
                      const std::function<void(const IdCheck&)>& launch_checking);
  void refuse_copy_while_recording(const char* direction) const;  // memory.cu
  void free_block(void* ptr, std::size_t size);                   // memory.cu: to the cache (cache_mutex_ held)
  void read_device(void* host_dst, const void* src,
                   std::size_t bytes);         // memory.cu: a copy, neither counted nor checked
  void* allocate_for_life(std::size_t bytes);  // memory.cu: device memory never freed, outside bytes_in_use

  std::atomic<std::size_t> bytes_in_use_{0};
  std::atomic<std::size_t> host_waits_{0};  // each copy between host and device: cuda-sim counts the GPU's
  std::mutex cache_mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> cache_;  // cuda: size -> free device blocks
  // cuda-sim frees at once, but counts the cudaMalloc calls the cache above would make: size -> blocks it would keep.
  std::unordered_map<std::size_t, std::size_t> kept_sizes_;
  std::atomic<std::size_t> driver_allocations_{0};
  // Graphs (graph.cu): the one being recorded (0: none), and which graph owns each block allocated while recording.
  std::unordered_map<std::uint64_t, std::unique_ptr<Graph>> graphs_;
  std::uint64_t recording_ = 0, last_graph_ = 0;
  std::unordered_map<void*, std::uint64_t> graph_blocks_;
  std::mutex checks_mutex_;
  // The checks queued and not yet read, in order, in runs of consecutive slots (the ring's, or a graph's).
  struct PendingChecks {
    const long long* slots;  // {first bad position, its value} per check; null once read into `found`
    std::vector<DescribeBadIndex> describe;
    std::vector<long long> found;
  };
  std::vector<PendingChecks> pending_;
  long long* slots_ = nullptr;  // checks.cu's ring: {first bad position, its value} per check
  std::size_t ring_used_ = 0;   // slots of the ring used since it was last reset
};

CudaBackend& backend();  // the one instance (memory.cu)

}  // namespace stepformer::STEPFORMER_CUDA_NS
