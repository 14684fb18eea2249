#pragma once
// Chapter 12 — training the language model: Adam, warmup then cosine decay, gradient clipping, fp32 or bf16
// autocast, and how much arithmetic a step is (for MFU).
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
};

// Adam (beta2 0.95, as Llama and GPT-3; no weight decay: a few thousand steps on 4 MB barely feel it).
class LMTrainer {
 public:
  LMTrainer(LanguageModel& model, const LMTrainOptions& o);
  // One optimizer step. Returns the mean loss per target token (nats) as a scalar on the model's device: read it
  // (item()) when it is printed, since a read makes the host wait for a GPU's queued work (docs/09_cuda.md).
  Tensor step(const LMBatch& batch);
  std::int64_t steps_done() const { return steps_; }

 private:
  LanguageModel& model_;
  LMTrainOptions o_;
  nn::Adam optimizer_;
  nn::CosineWarmup schedule_;
  std::int64_t steps_ = 0;
};

// The model FLOPs of a forward pass over B sequences of T tokens (every matrix product, 2 per multiply-add; as
// flops.h counts chapter 07's): per token and layer 2 D (2 D + 2 Hkv Dh) for the projections, 4 D F (two-matrix
// FFN) or 6 D F' (SwiGLU), 4 T D for the scores and the weighted values (the causal mask's zeros counted, as
// PyTorch computes them too); then 2 D V for the logits. A training step is 3x.
double lm_forward_flops(const LMConfig& cfg, std::int64_t B, std::int64_t T);

}  // namespace stepformer::transformer
