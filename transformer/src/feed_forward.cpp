// Chapter 04. Shape legend in transformer/config.h.
#include "transformer/feed_forward.h"

#include "autograd/ops.h"

namespace stepformer::transformer {

PositionwiseFeedForward::PositionwiseFeedForward(std::int64_t d_model, std::int64_t d_ff, double p, Generator& gen) {
  w_1 = register_module("w_1", std::make_shared<nn::Linear>(d_model, d_ff, true, gen));
  w_2 = register_module("w_2", std::make_shared<nn::Linear>(d_ff, d_model, true, gen));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(p, gen));
}

Tensor PositionwiseFeedForward::forward(const Tensor& x) {
  // EXERCISE 4.1: FFN(x) = W_2 Dropout(ReLU(W_1 x + b_1)) + b_2, position by position.
  const Tensor hidden = relu((*w_1)(x));  // [B, T, F]: Linear acts on the last dim, so each position alone
  return (*w_2)((*dropout)(hidden));      // [B, T, D]
  // END EXERCISE
}

}  // namespace stepformer::transformer
