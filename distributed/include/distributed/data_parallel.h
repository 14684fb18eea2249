#pragma once
// Chapter 10 — data parallelism (as PyTorch's DistributedDataParallel): every rank holds the whole model, runs
// forward and backward on its own share of the batch, and the ranks sum their gradients before the optimizer
// step, so every rank takes the same step.
//
// The sum is an all-reduce per *bucket* of gradients. Buckets hold parameters in reverse registration order
// (backward produces the last layers' gradients first) up to `bucket_bytes` each; a leaf's post-accumulate
// hook copies its gradient into its bucket, and a full bucket is sent at once, while backward computes the
// earlier layers' gradients: communication overlaps computation. Buckets are started strictly in index order,
// the same on every rank, because MPI pairs collectives by order (a bucket ready early waits for the ones
// before it).
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "nn/module.h"

namespace stepformer::distributed {

struct DataParallelOptions {
  std::size_t bucket_bytes = std::size_t{1} << 20;  // PyTorch's default is 25 MiB; ours are smaller models
  bool overlap = true;  // false: every bucket is sent after backward (to measure what overlap gains)
};

// Checks that every rank built the same model (names, shapes, dtypes of the parameters: a DistributedError names
// the first rank that differs), then copies rank 0's parameters and buffers to every rank.
void broadcast_parameters(nn::Module& model, Communicator& comm);

// A post-accumulate hook on every parameter, calling on_gradient(i) with the parameter's index as its gradient
// is complete; removed when this goes (the model may outlive its DataParallel or ZeroAdam, or get another).
class GradientHooks {
 public:
  GradientHooks(nn::NamedTensors params, const std::function<void(std::size_t)>& on_gradient);
  ~GradientHooks();
  GradientHooks(const GradientHooks&) = delete;
  GradientHooks& operator=(const GradientHooks&) = delete;

 private:
  nn::NamedTensors params_;
  std::vector<std::uint64_t> handles_;
};

class DataParallel {
 public:
  // broadcast_parameters, then hooks every parameter. Parameters must be contiguous CPU tensors.
  DataParallel(nn::Module& model, Communicator& comm, DataParallelOptions o = {});
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // After backward: waits for every bucket (sending those backward did not fill: a parameter without a
  // gradient on this rank counts as zeros), then writes the sum over ranks into every parameter's grad().
  void synchronize_gradients();

  struct Bucket {
    std::vector<std::size_t> params;  // indexes into model.named_parameters(), in the order they are packed
    std::vector<std::int64_t> offsets;
    Tensor flat;  // the gradients, packed; the all-reduce works on this
  };
  const std::vector<Bucket>& buckets() const { return buckets_; }
  const nn::NamedTensors& parameters() const { return params_; }
  // The buckets in the order they were started during the last backward (hooks), and how many were; the rest
  // were started by synchronize_gradients.
  const std::vector<std::size_t>& started_in_backward() const { return started_in_backward_; }
  double seconds_waiting() const { return seconds_waiting_; }  // in synchronize_gradients, summed over calls

 private:
  void on_gradient(std::size_t param);
  void pack(std::size_t param);

  Communicator& comm_;
  DataParallelOptions o_;
  nn::NamedTensors params_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;    // per parameter
  std::vector<std::size_t> slot_of_;      // per parameter: its place in its bucket
  std::vector<bool> packed_;              // per parameter, this step
  std::vector<std::size_t> ready_count_;  // per bucket, this step
  std::size_t next_to_start_ = 0;
  std::vector<std::size_t> current_started_, started_in_backward_;
  double seconds_waiting_ = 0;
  std::unique_ptr<GradientHooks> hooks_;  // last: removed before the buckets it fills go
};

}  // namespace stepformer::distributed
