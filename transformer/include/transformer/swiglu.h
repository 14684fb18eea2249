#pragma once
// Chapter 12 — the gated feed-forward network (SwiGLU) and the switch between the three feed-forwards chapter 12
// compares. Read docs/12_modern_lm.md beside this file.
#include <memory>

#include "nn/layers.h"

namespace stepformer::transformer {

// "FFN_SwiGLU(x, W, V, W2) = (Swish1(xW) ⊗ xV) W2" (Shazeer 2020, "GLU Variants Improve Transformer", eq. 6):
// a gate and a value projection D -> F, multiplied (swiglu, ops.h: Swish1 is SiLU), then F -> D. No biases (the paper's
// and Llama's choice). Three matrices instead of two, so at equal parameter count F is 2/3 of the two-matrix FFN's (the
// paper does the same): swiglu_hidden(d_ff).
class SwiGLU : public nn::UnaryModule {
 public:
  SwiGLU(std::int64_t d_model, std::int64_t hidden, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) override;  // [B, T, D] -> [B, T, D]

  std::shared_ptr<nn::Linear> w_gate, w_value;  // each [F, D]
  std::shared_ptr<nn::Linear> w_out;            // [D, F]
};

// The hidden size F' with 3 D F' = 2 D F, rounded to a multiple of 8 (rows of whole SIMD vectors).
std::int64_t swiglu_hidden(std::int64_t d_ff);

// relu and gelu: Linear(D, F) -> activation -> Linear(F, D), with biases, as chapter 04 and GPT-2.
enum class FeedForwardKind { relu, gelu, swiglu };
std::shared_ptr<nn::UnaryModule> make_feed_forward(FeedForwardKind kind, std::int64_t d_model, std::int64_t d_ff,
                                                   Generator& gen = default_generator());

}  // namespace stepformer::transformer
