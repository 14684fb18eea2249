#pragma once
// Chapter 10 — ZeRO stage 1 (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion
// Parameter Models"; llm.c's zero.cuh): Adam's two moments are split across the ranks instead of repeated on
// each. All parameters, in registration order, form one flat vector padded to a multiple of the ranks; rank r
// owns the r-th equal slice. A step:
//   1. during backward, each parameter's gradient is copied into the flat vector as it is ready (a hook, as
//      DataParallel's), and each chunk of it (about 1 MB, never across two slices) is reduced to the rank that
//      owns it as soon as all of it is there, last chunk first, overlapping backward: afterwards rank r's
//      slice holds the sum over ranks of its part of the gradient (a reduce-scatter, in pieces);
//   2. clip by the global gradient norm (each rank's slice's squares, summed over ranks);
//   3. Adam on the slice, updating the parameters in place (the same kernel and per-parameter step counts as
//      nn::Adam);
//   4. each parameter's part is broadcast from the rank that owns it into every rank's parameter (an
//      all-gather, without a copy through the flat vector).
// The moments take 2N/ranks floats per rank instead of 2N; each rank still receives its whole gradient from
// backward (sharding that too is ZeRO-2). Use it without DataParallel: the reductions are this step's sum. One
// backward per step, as DataParallel: a second gradient before step() is an error.
#include "distributed/communicator.h"
#include "distributed/data_parallel.h"
#include "nn/optim.h"

namespace stepformer::distributed {

class ZeroAdam : public nn::Optimizer {
 public:
  // Every parameter must be a contiguous float32 CPU tensor; clip_norm > 0 clips by the global norm. Hooks every
  // parameter (removed when it goes).
  ZeroAdam(nn::NamedTensors params, Communicator& comm, nn::Adam::Options o, double clip_norm = 0);

  void step() override;
  double last_gradient_norm() const { return norm_; }  // before clipping (0 unless clipping)
  // Collective (every rank calls it): the whole moments, gathered, under nn::Adam's keys, so a checkpoint
  // of a ZeRO run loads into plain Adam and the other way round. load_state_dict keeps this rank's slice.
  nn::StateDict state_dict() const override;
  void load_state_dict(const nn::StateDict& state) override;

  std::int64_t shard_begin() const { return begin_; }  // this rank's slice of the flat vector
  std::int64_t shard_size() const { return shard_; }
  // The gradient's chunks, and how many of them the hooks started during the last backward (the rest were
  // started by step(), after backward: communication that did not overlap it).
  std::int64_t chunk_count() const { return static_cast<std::int64_t>(chunk_start_.size()) - 1; }
  std::int64_t chunks_started_in_backward() const { return started_in_backward_; }

 private:
  void on_gradient(std::size_t i);
  void pack(std::size_t i);   // parameter i's gradient (zeros if it has none) into flat_
  void start_ready_chunks();  // reduce every complete chunk, in order, last first
  int owner(std::int64_t at) const { return static_cast<int>(at / shard_); }

  Communicator& comm_;
  nn::Adam::Options o_;
  double clip_norm_, norm_ = 0;
  std::vector<std::int64_t> offsets_;  // each parameter's start in the flat vector
  std::int64_t total_ = 0, shard_ = 0, begin_ = 0;
  Tensor flat_, grad_shard_, exp_avg_, exp_avg_sq_;               // grad_shard_: this rank's slice of flat_ (a view)
  std::vector<std::int64_t> chunk_start_;                         // chunk c is [chunk_start_[c], chunk_start_[c + 1])
  std::vector<std::int64_t> chunk_parameter_elements_, waiting_;  // per chunk: all, and not packed yet
  std::size_t next_chunk_ = 0;                                    // chunks not started yet: [0, next_chunk_)
  std::vector<bool> packed_;
  std::int64_t started_in_backward_ = 0, started_since_step_ = 0;
  std::unique_ptr<GradientHooks> hooks_;  // last: removed before the flat vector it fills goes
};

}  // namespace stepformer::distributed
