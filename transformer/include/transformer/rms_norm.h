#pragma once
// Chapter 12 — RMSNorm, the norm of modern decoder-only models. Read docs/12_modern_lm.md beside this file.
#include <memory>

#include "autograd/ops.h"
#include "nn/layers.h"

namespace stepformer::transformer {

// "RMSNorm regularizes the summed inputs ... according to the root mean square (RMS)" (Zhang & Sennrich 2019,
// equation 4): y = x / sqrt(mean(x^2) + eps) * g over the last dim. LayerNorm without the mean subtraction
// and without the bias: one reduction instead of two, and, the paper finds, no worse. eps sits inside the
// root, as in torch.nn.RMSNorm and Llama; weight g = 1 at init.
class RMSNorm : public nn::UnaryModule {
 public:
  explicit RMSNorm(std::int64_t dim, double eps = 1e-5);
  Tensor forward(const Tensor& x) override;  // [*, D] -> [*, D]

  std::int64_t dim;
  double eps;
  Tensor weight;  // [D]
};

// The two norms chapter 12 compares, behind one switch.
enum class NormKind { layer, rms };
std::shared_ptr<nn::UnaryModule> make_norm(NormKind kind, std::int64_t dim);

// x + residual and norm(x + residual), a block's residual sum and the norm that reads it: for an RMSNorm one pass
// over the rows (ops.h's add_rms_norm, the same values as the two ops), for another norm the add, then the norm.
SumAndNorm add_then_norm(nn::UnaryModule& norm, const Tensor& x, const Tensor& residual);

}  // namespace stepformer::transformer
