#include "distributed/train.h"

#include "autograd/autocast.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/ops.h"
#include "nn/checkpoint.h"

namespace stepformer::distributed {

using transformer::Vocabulary;

namespace {
// Chapter 07's Adam (transformer::Trainer): beta2 0.98, eps 1e-9 (the paper, 5.3); the schedule sets lr.
constexpr nn::Adam::Options kAdam{.lr = 0.0, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9};
}  // namespace

DistributedTrainer::DistributedTrainer(transformer::Transformer& model, Communicator& comm,
                                       const transformer::TrainOptions& o, DistributedOptions d)
    : model_(model), comm_(comm), o_(o), schedule_{model.cfg.d_model, o.warmup, o.lr_factor} {
  if (d.zero) {
    broadcast_parameters(model, comm);
    optimizer_ = std::make_unique<ZeroAdam>(model.named_parameters(), comm, kAdam, o.clip_norm);
  } else {
    data_parallel_ = std::make_unique<DataParallel>(model, comm, d.data_parallel);
    optimizer_ = std::make_unique<nn::Adam>(model.named_parameters(), kAdam);
  }
}

Tensor DistributedTrainer::local_loss(const Tensor& logits, const transformer::Batch& local) {
  // EXERCISE 10.2: global_tokens_ = all ranks' tokens; my summed loss/it
  global_tokens_ = comm_.all_reduce_sum(local.target_tokens);
  return cross_entropy(logits, local.tgt_out, Vocabulary::kPad, o_.label_smoothing, Reduction::sum) *
         (1.0 / static_cast<double>(global_tokens_));
  // END EXERCISE
}

double DistributedTrainer::step(const transformer::Batch& local) {
  model_.train();
  optimizer_->zero_grad();
  Tensor loss;
  {
    // bf16: the forward and the loss under autocast; the gradients the buckets sum are the float32 masters'
    // (chapter 11), so what travels between the ranks is float32 at either precision.
    AutocastGuard autocast(o_.precision);
    loss = local_loss(model_(local.src, local.tgt_in), local);
  }
  if (global_tokens_ <= 0)  // every rank sees the same count: all of them stop here
    throw DistributedError(
        fmt::format("DistributedTrainer::step: the whole batch has {} target tokens", global_tokens_));
  loss.backward();
  if (data_parallel_) {
    data_parallel_->synchronize_gradients();  // every rank now holds the same, summed gradients
    if (o_.clip_norm > 0) nn::clip_grad_norm_(model_.parameters(), o_.clip_norm);
  }  // ZeroAdam sums its slice and clips by the global norm inside step()
  optimizer_->set_lr(schedule_(++steps_));
  optimizer_->step();
  return comm_.all_reduce_sum(loss.item());
}

namespace {
// The name under which rank r's copy of an own generator is saved: "dropout" -> "dropout.rank1".
transformer::NamedGenerators on_rank(const transformer::NamedGenerators& own, int r) {
  transformer::NamedGenerators named;
  for (const auto& [name, gen] : own) named.emplace_back(fmt::format("{}.rank{}", name, r), gen);
  return named;
}
}  // namespace

void DistributedTrainer::save(const std::filesystem::path& path, const transformer::NamedGenerators& shared,
                              const transformer::NamedGenerators& own) const {
  nn::Metadata meta = transformer::training_metadata(steps_, shared);
  for (const auto& [name, gen] : own) {  // collective: every rank sends its own state to every rank
    const auto seeds = comm_.all_gather(static_cast<std::int64_t>(gen->seed()));
    const auto offsets = comm_.all_gather(static_cast<std::int64_t>(gen->offset()));
    for (int r = 0; r < comm_.size(); ++r) {
      Generator saved(static_cast<std::uint64_t>(seeds[static_cast<std::size_t>(r)]));
      saved.set_offset(static_cast<std::uint64_t>(offsets[static_cast<std::size_t>(r)]));
      meta.merge(transformer::training_metadata(steps_, on_rank({{name, &saved}}, r)));
    }
  }
  // ZeroAdam::state_dict is collective: rank 0 calls it inside save_checkpoint, the others here, once each.
  if (comm_.rank() == 0)
    nn::save_checkpoint(path, model_, optimizer_.get(), meta);
  else
    (void)optimizer_->state_dict();
  comm_.barrier();
}

std::string rank_change(const nn::Metadata& meta, int ranks, const transformer::NamedGenerators& own) {
  if (own.empty()) return "";
  const std::string first = own.front().first;
  int saved = 0;  // the ranks that wrote the file: those whose copy of the first own generator it holds
  while (meta.count(fmt::format("generator.{}.rank{}.seed", first, saved))) ++saved;
  if (saved == 0 || saved == ranks) return "";
  std::vector<std::string> names;
  for (const auto& [name, gen] : own) names.push_back(name);
  const std::string which = fmt::format("{}", fmt::join(names, ", "));
  std::string note = fmt::format(
      "the checkpoint was written by {} ranks and resumes on {}: the weights, the optimizer's state, the step and "
      "the shared generators carry over; ",
      saved, ranks);
  if (saved > ranks)
    note += fmt::format(
        "the own generators ({}) of ranks {} to {} are dropped, so their dropout masks are not drawn "
        "again and the run does not continue as the {}-rank run would",
        which, ranks, saved - 1, saved);
  else
    note += fmt::format("ranks {} to {} have no saved own generators ({}) and keep their fresh ones", saved, ranks - 1,
                        which);
  return note;
}

std::string DistributedTrainer::load(const std::filesystem::path& path, const transformer::NamedGenerators& shared,
                                     const transformer::NamedGenerators& own) {
  const nn::Metadata meta = nn::load_checkpoint(path, model_, optimizer_.get());
  steps_ = transformer::restore_training_metadata(meta, path, shared);
  const transformer::NamedGenerators mine = on_rank(own, comm_.rank());
  if (!mine.empty() && meta.count("generator." + mine.front().first + ".seed"))
    transformer::restore_training_metadata(meta, path, mine);
  return rank_change(meta, comm_.size(), own);
}

}  // namespace stepformer::distributed
