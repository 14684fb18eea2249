#pragma once
// Chapter 07 — the training recipe of section 5.3-5.4, and checkpoints that resume exactly.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "nn/optim.h"
#include "nn/safetensors.h"
#include "nn/schedule.h"
#include "transformer/data.h"
#include "transformer/model.h"

namespace stepformer::transformer {

struct TrainOptions {
  std::int64_t warmup = 400;     // the paper: 4000 on WMT; small tasks want fewer
  double lr_factor = 1.0;        // multiplies the Noam schedule (the annotated Transformer uses 1-2)
  double label_smoothing = 0.1;  // "epsilon_ls = 0.1" (5.4)
  double clip_norm = 1.0;        // global gradient norm (not in the paper; standard, and cheap insurance)
  // float32, or bfloat16: the forward pass and the loss run under autocast (autograd/autocast.h, chapter 11);
  // the weights, their gradients and Adam's moments stay float32 either way.
  DType precision = DType::float32;
};

// "fp32" -> float32, "bf16" -> bfloat16 (the command lines' --precision); ValueError naming anything else.
DType precision_from_name(const std::string& name);

// Adam(beta1 0.9, beta2 0.98, eps 1e-9) with the warmup schedule lrate = factor * d_model^-0.5 *
// min(step^-0.5, step * warmup^-1.5) (5.3), cross-entropy with label smoothing over non-PAD targets.
using NamedGenerators = std::vector<std::pair<std::string, Generator*>>;

class Trainer {
 public:
  Trainer(Transformer& model, const TrainOptions& o);

  double step(const Batch& batch);  // one optimizer step; returns the mean loss per target token
  std::int64_t steps_done() const { return steps_; }
  double learning_rate() const { return optimizer_.lr(); }
  DType precision() const { return o_.precision; }

  // The model, the optimizer state, the step count and the named generators' offsets (the dropout
  // masks and the data order), so that a resumed run continues bit-identically.
  void save(const std::filesystem::path& path, const NamedGenerators& generators) const;
  void load(const std::filesystem::path& path, const NamedGenerators& generators);

 private:
  Transformer& model_;
  TrainOptions o_;
  nn::Adam optimizer_;
  nn::NoamSchedule schedule_;
  std::int64_t steps_ = 0;
};

// What a checkpoint's metadata holds besides the tensors: the step count and each named generator's seed
// and offset (Trainer::save; chapter 10's DistributedTrainer writes the same).
nn::Metadata training_metadata(std::int64_t steps, const NamedGenerators& generators);
// Restores the generators and returns the step count; CheckpointError naming `path` when a key is missing.
std::int64_t restore_training_metadata(const nn::Metadata& meta, const std::filesystem::path& path,
                                       const NamedGenerators& generators);

// Mean loss per target token over batches, in eval mode (no dropout, no label smoothing), without a graph.
double evaluate_loss(Transformer& model, const std::vector<Batch>& batches);

// Output tokens allowed for a source of S tokens: 2 S + 10 (English may take more words than German, and
// subwords split words unevenly) — never the reference's length, which a translator does not know.
std::int64_t max_output_length(std::int64_t source_length);

// Greedy translations of every pair's source, in batches, in eval mode.
std::vector<std::vector<std::string>> greedy_translations(Transformer& model, const std::vector<Pair>& pairs,
                                                          const Vocabulary& src_vocab, const Vocabulary& tgt_vocab,
                                                          std::int64_t batch_size = 64);

// Beam search (decoding.h) of every pair's source, one at a time: `width` prefixes, GNMT length penalty `alpha`.
std::vector<std::vector<std::string>> beam_translations(Transformer& model, const std::vector<Pair>& pairs,
                                                        const Vocabulary& src_vocab, const Vocabulary& tgt_vocab,
                                                        std::int64_t width, double alpha = 0.6);

// The fraction of pairs whose greedy translation equals the reference exactly.
double exact_match(Transformer& model, const std::vector<Pair>& pairs, const Vocabulary& src_vocab,
                   const Vocabulary& tgt_vocab, std::int64_t batch_size = 64);

}  // namespace stepformer::transformer
