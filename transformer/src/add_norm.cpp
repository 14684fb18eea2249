// Chapter 03. Shape legend in transformer/config.h.
#include "transformer/add_norm.h"

#include "autograd/ops.h"

namespace stepformer::transformer {

AddNorm::AddNorm(std::int64_t d_model, double p, bool pre, Generator& gen) : pre_norm(pre) {
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(d_model));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(p, gen));
}

Tensor AddNorm::forward(const Tensor& x, const std::function<Tensor(const Tensor&)>& sublayer) {
  // EXERCISE 3.1: LayerNorm(x + Dropout(Sublayer(x))); pre_norm: x + Dropout(Sublayer(LayerNorm(x)))
  if (pre_norm) return x + (*dropout)(sublayer((*norm)(x)));  // x + Dropout(Sublayer(LayerNorm(x)))
  return (*norm)(x + (*dropout)(sublayer(x)));                // LayerNorm(x + Dropout(Sublayer(x)))
  // END EXERCISE
}

}  // namespace stepformer::transformer
