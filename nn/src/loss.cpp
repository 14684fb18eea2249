#include "nn/loss.h"

#include <fmt/format.h>

#include "autograd/errors.h"

namespace stepformer::nn {

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (input.shape() != target.shape())  // torch broadcasts with a warning; a silent broadcast here is a bug
    throw ShapeError(fmt::format("mse_loss: input {} and target {} must have the same shape", to_string(input.shape()),
                                 to_string(target.shape())));
  const Tensor d = input - target;
  const Tensor sq = d * d;
  switch (reduction) {
    case Reduction::mean: return mean(sq);
    case Reduction::sum: return sum(sq);
    case Reduction::none: return sq;
  }
  return sq;
}

}  // namespace stepformer::nn
