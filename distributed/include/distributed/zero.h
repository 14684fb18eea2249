#pragma once
// Chapter 10 — ZeRO stage 1 (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion
// Parameter Models"; llm.c's zero.cuh): Adam's two moments are split across the ranks instead of repeated on
// each. All parameters, in registration order, form one flat vector padded to a multiple of the ranks; rank r
// owns the r-th equal slice. A step:
//   1. reduce-scatter the flat gradient: rank r receives the sum over ranks of its slice only;
//   2. clip by the global gradient norm (each rank's slice's squares, summed over ranks);
//   3. Adam on the slice (the same kernel and per-parameter step counts as nn::Adam);
//   4. all-gather the updated slices: every rank holds every parameter again.
// The moments take 2N/ranks floats per rank instead of 2N. The reduce-scatter runs after backward (no
// overlap with it, as llm.c); plain DataParallel overlaps. Use it without DataParallel's gradient buckets:
// the reduce-scatter is this step's gradient sum.
#include "distributed/communicator.h"
#include "nn/optim.h"

namespace stepformer::distributed {

class ZeroAdam : public nn::Optimizer {
 public:
  // Every parameter must be a contiguous float32 CPU tensor; clip_norm > 0 clips by the global norm.
  ZeroAdam(nn::NamedTensors params, Communicator& comm, nn::Adam::Options o, double clip_norm = 0);

  void step() override;
  double last_gradient_norm() const { return norm_; }  // before clipping (0 unless clipping)

  // Collective (every rank calls it): the whole moments, gathered, under nn::Adam's keys, so a checkpoint
  // of a ZeRO run loads into plain Adam and the other way round. load_state_dict keeps this rank's slice.
  nn::StateDict state_dict() const override;
  void load_state_dict(const nn::StateDict& state) override;

  std::int64_t shard_begin() const { return begin_; }  // this rank's slice of the flat vector
  std::int64_t shard_size() const { return shard_; }

 private:
  Communicator& comm_;
  nn::Adam::Options o_;
  double clip_norm_, norm_ = 0;
  std::vector<std::int64_t> offsets_;  // each parameter's start in the flat vector
  std::int64_t total_ = 0, shard_ = 0, begin_ = 0;
  Tensor flat_, grad_shard_, exp_avg_, exp_avg_sq_;  // flat_: gradients, then the gathered parameters
};

}  // namespace stepformer::distributed
