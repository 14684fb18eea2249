#pragma once
// Chapter 12 — training the language model: Adam, warmup then cosine decay, gradient clipping, fp32 or bf16
// autocast, and how much arithmetic a step is (for MFU).
#include <memory>

#include "autograd/device_graph.h"
#include "nn/optim.h"
#include "nn/schedule.h"
#include "transformer/lm_data.h"

namespace stepformer::transformer {

struct LMTrainOptions {
  double lr = 2e-3;  // the peak; small models take a large one (Llama's 7B used 3e-4)
  std::int64_t warmup = 100;
  std::int64_t total_steps = 1000;  // the cosine reaches lr / 10 here (Llama: "the final learning rate is 10% ...")
  double clip_norm = 1.0;
  DType precision = DType::float32;  // bfloat16: forward and loss under autocast (chapter 11)
  // On a CUDA device: the step recorded once as a device graph (its third, after two eager steps) and replayed for
  // each later one of the same batch shape, up to total_steps (docs/09_cuda.md, "Graphs"). The same numbers.
  bool replay = true;
};

// Adam (beta2 0.95, as Llama and GPT-3; no weight decay: a few thousand steps on 4 MB barely feel it).
class LMTrainer {
 public:
  LMTrainer(LanguageModel& model, const LMTrainOptions& o);
  ~LMTrainer();
  // One optimizer step. Returns the mean loss per target token (nats) as a scalar on the model's device: read it
  // (item()) when it is printed, since a read makes the host wait for a GPU's queued work (docs/09_cuda.md).
  Tensor step(const LMBatch& batch);
  std::int64_t steps_done() const { return steps_; }
  bool replaying() const { return graph_ != nullptr; }  // the steps are replays of a recorded one

 private:
  Tensor eager_step(const Tensor& inputs, const Tensor& targets);  // inputs and targets on the model's device
  void record(const LMBatch& batch);

  LanguageModel& model_;
  LMTrainOptions o_;
  nn::Adam optimizer_;
  nn::CosineWarmup schedule_;
  std::int64_t steps_ = 0;
  // The recorded step (replay): its batch, filled in place; its loss; the schedule's values of every step (float64
  // [total_steps, 3]: lr, 1 - beta1^t, 1 - beta2^t) and the row of the next, both on the device.
  std::unique_ptr<DeviceGraph> graph_;
  Tensor inputs_, targets_, loss_, schedule_rows_, next_row_, one_;
};

// The model FLOPs of a forward pass over B sequences of T tokens (every matrix product, 2 per multiply-add; as
// flops.h counts chapter 07's): per token and layer 2 D (2 D + 2 Hkv Dh) for the projections, 4 D F (two-matrix
// FFN) or 6 D F' (SwiGLU), 4 T D for the scores and the weighted values (the causal mask's zeros counted, as
// PyTorch computes them too); then 2 D V for the logits. A training step is 3x.
double lm_forward_flops(const LMConfig& cfg, std::int64_t B, std::int64_t T);

}  // namespace stepformer::transformer
