// Chapter 12. Shape legend in transformer/config.h.
#include "transformer/lm_train.h"

#include <cmath>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops.h"

namespace stepformer::transformer {

namespace {
constexpr double kBeta1 = 0.9, kBeta2 = 0.95;
}  // namespace

LMTrainer::LMTrainer(LanguageModel& model, const LMTrainOptions& o)
    : model_(model),
      o_(o),
      optimizer_(model.named_parameters(), nn::Adam::Options{o.lr, kBeta1, kBeta2, 1e-8, 0.0}),
      schedule_{o.lr, o.warmup, o.total_steps, o.lr / 10} {}

LMTrainer::~LMTrainer() = default;

Tensor LMTrainer::eager_step(const Tensor& inputs, const Tensor& targets) {
  model_.train();
  optimizer_.zero_grad();
  Tensor loss;
  {
    const AutocastGuard autocast(o_.precision);
    loss = cross_entropy(model_(inputs), targets);
  }
  loss.backward();
  if (o_.clip_norm > 0) nn::clip_grad_norm_(model_.parameters(), o_.clip_norm);
  optimizer_.step();
  return loss.detach();
}

Tensor LMTrainer::step(const LMBatch& batch) {
  const Device device = model_.tokens->weight.device();
  const bool same_shapes =
      graph_ && batch.inputs.shape() == inputs_.shape() && batch.targets.shape() == targets_.shape();
  if (graph_ && (!same_shapes || steps_ >= o_.total_steps)) {
    // An eager step between replays: the next replay reads the row after it.
    optimizer_.set_lr(schedule_(++steps_));
    const Tensor loss = eager_step(batch.inputs.to(device), batch.targets.to(device));
    fill_(next_row_, static_cast<double>(steps_));
    return loss;
  }
  const bool recording = !graph_ && o_.replay && steps_ == 2 && steps_ < o_.total_steps &&
                         (device.type == DeviceType::cuda || device.type == DeviceType::cuda_sim);
  if (recording) record(batch);
  optimizer_.set_lr(schedule_(++steps_));  // the host's: an eager step reads it, a replay its row on the device
  if (!graph_) return eager_step(batch.inputs.to(device), batch.targets.to(device));
  copy_(inputs_, batch.inputs.to(device));  // the graph reads its batch where it recorded it
  copy_(targets_, batch.targets.to(device));
  graph_->replay();
  if (!recording) optimizer_.count_replayed_step();  // the recording's step() counted the first
  Tensor loss = empty(loss_.shape(), {loss_.dtype(), device});
  return copy_(loss, loss_);  // the caller's own: the next replay writes loss_ again
}

// The step as a device graph. What the host computes per step is frozen in a recording, so the schedule's lr and
// Adam's bias corrections are gathered on the device from a table of every step's, at a row the graph advances.
// Recording runs nothing: the step it records is the first replay's.
void LMTrainer::record(const LMBatch& batch) {
  const Device device = model_.tokens->weight.device();
  std::vector<double> rows;
  for (std::int64_t t = 1; t <= o_.total_steps; ++t)
    rows.insert(rows.end(), {schedule_(t), 1 - std::pow(kBeta1, static_cast<double>(t)),
                             1 - std::pow(kBeta2, static_cast<double>(t))});
  schedule_rows_ = from_vector(rows, {o_.total_steps, 3}, {DType::float64, device});
  next_row_ = full({1}, static_cast<double>(steps_), {DType::int64, device});
  one_ = full({1}, 1, {DType::int64, device});
  inputs_ = empty(batch.inputs.shape(), {batch.inputs.dtype(), device});  // the graph's own, never the caller's
  targets_ = empty(batch.targets.shape(), {batch.targets.dtype(), device});
  graph_ = std::make_unique<DeviceGraph>(device, [&] {
    optimizer_.read_step_values_from(view(embedding(schedule_rows_, next_row_), {3}));
    add_(next_row_, one_);
    loss_ = eager_step(inputs_, targets_);
  });
  optimizer_.read_step_values_from(Tensor());  // eager steps read the host's again
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
