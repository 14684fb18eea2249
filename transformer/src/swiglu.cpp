// Chapter 12. Shape legend in transformer/config.h.
#include "transformer/swiglu.h"

#include <algorithm>

#include "autograd/ops.h"

namespace stepformer::transformer {

SwiGLU::SwiGLU(std::int64_t d, std::int64_t f, Generator& gen) {
  w_gate = register_module("w_gate", std::make_shared<nn::Linear>(d, f, false, gen));
  w_value = register_module("w_value", std::make_shared<nn::Linear>(d, f, false, gen));
  w_out = register_module("w_out", std::make_shared<nn::Linear>(f, d, false, gen));
}

Tensor SwiGLU::forward(const Tensor& x) {
  return (*w_out)(swiglu((*w_gate)(x), (*w_value)(x)));  // [B, T, F] gate and value -> [B, T, D]
}

std::int64_t swiglu_hidden(std::int64_t d_ff) { return std::max<std::int64_t>(8, (2 * d_ff / 3 + 7) / 8 * 8); }

std::shared_ptr<nn::UnaryModule> make_feed_forward(FeedForwardKind kind, std::int64_t d, std::int64_t f,
                                                   Generator& gen) {
  if (kind == FeedForwardKind::swiglu) return std::make_shared<SwiGLU>(d, swiglu_hidden(f), gen);
  auto mlp = std::make_shared<nn::Sequential>();
  mlp->push_back(std::make_shared<nn::Linear>(d, f, true, gen));
  if (kind == FeedForwardKind::gelu)
    mlp->push_back(std::make_shared<nn::GELU>());
  else
    mlp->push_back(std::make_shared<nn::ReLU>());
  mlp->push_back(std::make_shared<nn::Linear>(f, d, true, gen));
  return mlp;
}

}  // namespace stepformer::transformer
