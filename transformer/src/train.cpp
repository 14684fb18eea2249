// Chapter 07: training.
#include "transformer/train.h"

#include <fmt/format.h>

#include "autograd/autocast.h"
#include "autograd/errors.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/checkpoint.h"
#include "transformer/decoding.h"

namespace stepformer::transformer {

Trainer::Trainer(Transformer& model, const TrainOptions& o)
    : model_(model),
      o_(o),
      optimizer_(model.named_parameters(), {.lr = 0.0, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-9}),
      schedule_{model.cfg.d_model, o.warmup, o.lr_factor} {}

DType precision_from_name(const std::string& name) {
  if (name == "fp32") return DType::float32;
  if (name == "bf16") return DType::bfloat16;
  throw ValueError(fmt::format("precision: '{}' is not one of fp32, bf16", name));
}

double Trainer::step(const Batch& batch) {
  model_.train();
  optimizer_.zero_grad();
  Tensor loss;
  {
    AutocastGuard autocast(o_.precision);  // as torch.autocast: around the forward and the loss, not backward
    const Tensor logits = model_(batch.src, batch.tgt_in);  // [B, T, V]
    loss = cross_entropy(logits, batch.tgt_out, Vocabulary::kPad, o_.label_smoothing);
  }
  loss.backward();
  if (o_.clip_norm > 0) nn::clip_grad_norm_(model_.parameters(), o_.clip_norm);
  optimizer_.set_lr(schedule_(++steps_));
  optimizer_.step();
  return loss.item();
}

nn::Metadata training_metadata(std::int64_t steps, const NamedGenerators& generators) {
  nn::Metadata meta{{"step", std::to_string(steps)}};
  for (const auto& [name, gen] : generators) {
    meta["generator." + name + ".seed"] = std::to_string(gen->seed());
    meta["generator." + name + ".offset"] = std::to_string(gen->offset());
  }
  return meta;
}

std::int64_t restore_training_metadata(const nn::Metadata& meta, const std::filesystem::path& path,
                                       const NamedGenerators& generators) {
  auto number = [&](const std::string& key) -> std::uint64_t {
    auto it = meta.find(key);
    if (it == meta.end())
      throw nn::CheckpointError(fmt::format("{}: no '{}' in the checkpoint's metadata", path.string(), key));
    return std::stoull(it->second);
  };
  const auto steps = static_cast<std::int64_t>(number("step"));
  for (const auto& [name, gen] : generators) {
    *gen = Generator(number("generator." + name + ".seed"));
    gen->set_offset(number("generator." + name + ".offset"));
  }
  return steps;
}

void Trainer::save(const std::filesystem::path& path, const NamedGenerators& generators) const {
  nn::save_checkpoint(path, model_, &optimizer_, training_metadata(steps_, generators));
}

void Trainer::load(const std::filesystem::path& path, const NamedGenerators& generators) {
  steps_ = restore_training_metadata(nn::load_checkpoint(path, model_, &optimizer_), path, generators);
}

double evaluate_loss(Transformer& model, const std::vector<Batch>& batches) {
  model.eval();
  NoGradGuard no_grad;
  double total = 0;
  std::int64_t tokens = 0;
  for (const Batch& b : batches) {
    total += cross_entropy(model(b.src, b.tgt_in), b.tgt_out, Vocabulary::kPad, 0.0, Reduction::sum).item();
    tokens += b.target_tokens;
  }
  return tokens ? total / static_cast<double>(tokens) : 0.0;
}

std::int64_t max_output_length(std::int64_t source_length) { return 2 * source_length + 10; }

std::vector<std::vector<std::string>> greedy_translations(Transformer& model, const std::vector<Pair>& pairs,
                                                          const Vocabulary& sv, const Vocabulary& tv,
                                                          std::int64_t batch_size) {
  model.eval();
  std::vector<std::vector<std::string>> out;
  for (std::size_t i = 0; i < pairs.size(); i += static_cast<std::size_t>(batch_size)) {
    const std::vector<Pair> chunk(
        pairs.begin() + static_cast<std::ptrdiff_t>(i),
        pairs.begin() + static_cast<std::ptrdiff_t>(std::min(pairs.size(), i + static_cast<std::size_t>(batch_size))));
    const Batch b = make_batch(chunk, sv, tv);
    for (const auto& ids : greedy_decode(model, b.src, {.max_len = max_output_length(b.src.size(1))}))
      out.push_back(tv.decode(ids));
  }
  return out;
}

std::vector<std::vector<std::string>> beam_translations(Transformer& model, const std::vector<Pair>& pairs,
                                                        const Vocabulary& sv, const Vocabulary& tv, std::int64_t width,
                                                        double alpha) {
  model.eval();
  std::vector<std::vector<std::string>> out;
  for (const Pair& p : pairs) {
    const Batch b = make_batch({{p.src, {}}}, sv, tv);
    out.push_back(tv.decode(beam_decode(model, b.src, width, alpha, {.max_len = max_output_length(b.src.size(1))})[0]));
  }
  return out;
}

double exact_match(Transformer& model, const std::vector<Pair>& pairs, const Vocabulary& sv, const Vocabulary& tv,
                   std::int64_t batch_size) {
  const auto translations = greedy_translations(model, pairs, sv, tv, batch_size);
  std::int64_t right = 0;
  for (std::size_t k = 0; k < pairs.size(); ++k) right += translations[k] == pairs[k].tgt;
  return pairs.empty() ? 0.0 : static_cast<double>(right) / static_cast<double>(pairs.size());
}

}  // namespace stepformer::transformer
