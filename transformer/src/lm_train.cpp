// Chapter 12. Shape legend in transformer/config.h.
#include "transformer/lm_train.h"

#include "autograd/autocast.h"
#include "autograd/ops.h"

namespace stepformer::transformer {

LMTrainer::LMTrainer(LanguageModel& model, const LMTrainOptions& o)
    : model_(model),
      o_(o),
      optimizer_(model.named_parameters(), nn::Adam::Options{o.lr, 0.9, 0.95, 1e-8, 0.0}),
      schedule_{o.lr, o.warmup, o.total_steps, o.lr / 10} {}

Tensor LMTrainer::step(const LMBatch& batch) {
  model_.train();
  optimizer_.zero_grad();
  const Device device = model_.tokens->weight.device();
  Tensor loss;
  {
    const AutocastGuard autocast(o_.precision);
    loss = cross_entropy(model_(batch.inputs.to(device)), batch.targets.to(device));
  }
  loss.backward();
  if (o_.clip_norm > 0) nn::clip_grad_norm_(model_.parameters(), o_.clip_norm);
  optimizer_.set_lr(schedule_(++steps_));
  optimizer_.step();
  return loss.detach();
}

double lm_forward_flops(const LMConfig& c, std::int64_t B, std::int64_t T) {
  const double D = static_cast<double>(c.d_model), Dh = D / static_cast<double>(c.n_heads);
  const double kv = static_cast<double>(c.n_kv_heads) * Dh;
  const double ffn = c.feed_forward == FeedForwardKind::swiglu ? 6 * D * static_cast<double>(swiglu_hidden(c.d_ff))
                                                               : 4 * D * static_cast<double>(c.d_ff);
  const double per_token_layer = 2 * D * (2 * D + 2 * kv) + ffn + 4 * static_cast<double>(T) * D;
  const double per_token = static_cast<double>(c.n_layers) * per_token_layer + 2 * D * static_cast<double>(c.vocab);
  return static_cast<double>(B * T) * per_token;
}

}  // namespace stepformer::transformer
