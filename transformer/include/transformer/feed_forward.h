#pragma once
// Chapter 04 — the position-wise feed-forward network. Read docs/04_feed_forward.md.
#include "nn/layers.h"

namespace stepformer::transformer {

// "FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 ... applied to each position separately and identically"
// (3.3), with dropout after the ReLU as the annotated Transformer does.
class PositionwiseFeedForward : public nn::CallableModule<PositionwiseFeedForward> {
 public:
  PositionwiseFeedForward(std::int64_t d_model, std::int64_t d_ff, double dropout = 0.0,
                          Generator& gen = default_generator());
  Tensor forward(const Tensor& x);  // [B, T, D] -> [B, T, D]

  std::shared_ptr<nn::Linear> w_1;  // [F, D]
  std::shared_ptr<nn::Linear> w_2;  // [D, F]
  std::shared_ptr<nn::Dropout> dropout;
};

}  // namespace stepformer::transformer
