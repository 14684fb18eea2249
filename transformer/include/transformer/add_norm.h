#pragma once
// Chapter 03 — the residual connection and layer normalisation. Read docs/03_add_norm.md.
#include <functional>

#include "nn/layers.h"
#include "transformer/config.h"

namespace stepformer::transformer {

// "The output of each sub-layer is LayerNorm(x + Sublayer(x)) ... We apply dropout to the output of each
// sub-layer, before it is added to the sub-layer input and normalized" (3.1, 5.4): post-norm.
// Pre-norm, x + Dropout(Sublayer(LayerNorm(x))), is the option most later models use (it trains deep
// stacks without warmup; Xiong et al. 2020); it then needs one more LayerNorm after the last layer.
class AddNorm : public nn::CallableModule<AddNorm> {
 public:
  AddNorm(std::int64_t d_model, double dropout, bool pre_norm = false, Generator& gen = default_generator());
  // x [B, T, D]; sublayer maps [B, T, D] -> [B, T, D].
  Tensor forward(const Tensor& x, const std::function<Tensor(const Tensor&)>& sublayer);

  bool pre_norm;
  std::shared_ptr<nn::LayerNorm> norm;  // its own LayerNorm: never shared between sublayers
  std::shared_ptr<nn::Dropout> dropout;
};

}  // namespace stepformer::transformer
