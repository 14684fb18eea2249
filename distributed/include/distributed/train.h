#pragma once
// Chapter 10 — chapter 07's training step (transformer::Trainer: Adam, the warmup schedule, label smoothing,
// global-norm clipping) on several processes, each with its own share of every batch.
//
// The loss: each rank sums the label-smoothed cross-entropy over its own target tokens and divides by the
// number of target tokens of the *whole* batch (an all-reduce of one count). Summing those gradients over the
// ranks then gives exactly the gradient of the mean over the concatenated batch, which one process would
// compute. Averaging each rank's own mean instead weighs a rank with few tokens (short sentences, much PAD)
// as much as one with many: a different, wrong gradient (docs/10_distributed.md, "The right average").
#include <filesystem>
#include <memory>

#include "distributed/communicator.h"
#include "distributed/data_parallel.h"
#include "distributed/zero.h"
#include "transformer/train.h"

namespace stepformer::distributed {

struct DistributedOptions {
  bool zero = false;  // ZeRO-1 (ZeroAdam) instead of DataParallel's buckets + a full Adam per rank
  DataParallelOptions data_parallel = {};
};

// What resuming a checkpoint's metadata on `ranks` ranks keeps and drops, in words, when the file was written by
// another number of ranks (counted from the `own` generators it holds, generator.NAME.rankR.*); empty when the
// count is the same or the file holds no own generator.
std::string rank_change(const nn::Metadata& meta, int ranks, const transformer::NamedGenerators& own);

class DistributedTrainer {
 public:
  // Copies rank 0's parameters to every rank (and checks that every rank built the same model).
  DistributedTrainer(transformer::Transformer& model, Communicator& comm, const transformer::TrainOptions& o,
                     DistributedOptions d = {});

  // One optimizer step on this rank's share of the batch. Returns the loss per target token of the whole
  // batch (the same on every rank).
  double step(const transformer::Batch& local);
  std::int64_t steps_done() const { return steps_; }
  double learning_rate() const { return optimizer_->lr(); }
  std::int64_t last_global_tokens() const { return global_tokens_; }
  const DataParallel* data_parallel() const { return data_parallel_.get(); }  // null with ZeRO
  const nn::Optimizer& optimizer() const { return *optimizer_; }

  // Collective: every rank calls it; rank 0 writes the file (atomically) and the others wait until it exists.
  // The file is chapter 07's checkpoint (the optimizer's moments whole, even with ZeRO): a 2-rank run resumes
  // from it on any number of ranks, or in 07_transformer.
  // `shared`: generators equal on every rank (the data order), saved once. `own`: each rank's own (its dropout
  // masks differ from the other ranks'), gathered into the file as `generator.NAME.rankR.*` for every rank R
  // and restored on the rank of the same number, so that a resumed run with dropout continues bit-identically.
  // A rank the file has no entry for (it was written by fewer ranks) keeps its generator as it is.
  void save(const std::filesystem::path& path, const transformer::NamedGenerators& shared,
            const transformer::NamedGenerators& own) const;
  // Returns rank_change's note (empty when the file was written by as many ranks as run now).
  std::string load(const std::filesystem::path& path, const transformer::NamedGenerators& shared,
                   const transformer::NamedGenerators& own);

 private:
  // This rank's share of the loss of the whole batch (the label-smoothed cross-entropy over its target tokens,
  // divided by all ranks' target tokens); sets global_tokens_.
  Tensor local_loss(const Tensor& logits, const transformer::Batch& local);

  transformer::Transformer& model_;
  Communicator& comm_;
  transformer::TrainOptions o_;
  std::unique_ptr<DataParallel> data_parallel_;
  std::unique_ptr<nn::Optimizer> optimizer_;
  nn::NoamSchedule schedule_;
  std::int64_t steps_ = 0, global_tokens_ = 0;
};

}  // namespace stepformer::distributed
