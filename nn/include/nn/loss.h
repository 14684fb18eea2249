#pragma once
// Losses. Cross-entropy is the engine's fused op (stepformer::cross_entropy, autograd/ops.h: logits
// [..., C], ignore_index, label_smoothing, reduction); it is re-exported here with MSE.
#include "autograd/ops.h"

namespace stepformer::nn {

using stepformer::cross_entropy;
using stepformer::Reduction;

// mean, sum or elementwise (input - target)^2, as torch.nn.functional.mse_loss.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);

}  // namespace stepformer::nn
