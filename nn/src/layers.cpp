#include "nn/layers.h"

#include <fmt/format.h>

#include <cmath>

#include "autograd/errors.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/init.h"

namespace stepformer::nn {

Linear::Linear(std::int64_t in, std::int64_t out, bool has_bias, Generator& gen) : in_features(in), out_features(out) {
  if (in < 1 || out < 1) throw ValueError(fmt::format("Linear: sizes must be positive, got in {} out {}", in, out));
  weight = register_parameter("weight", empty({out, in}));
  init::kaiming_uniform_(weight, std::sqrt(5.0), gen);  // torch.nn.Linear.reset_parameters
  if (has_bias) {
    bias = register_parameter("bias", empty({out}));
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    init::uniform_(bias, -bound, bound, gen);
  }
}

Tensor Linear::forward(const Tensor& x) {
  if (x.dim() < 1 || x.size(-1) != in_features)
    throw ShapeError(fmt::format("Linear expected [*, {}], got {}", in_features, to_string(x.shape())));
  const Tensor y = matmul(x, transpose(weight, 0, 1));  // [*, out]; the transpose is a view
  return bias.defined() ? y + bias : y;
}

Embedding::Embedding(std::int64_t V, std::int64_t D, std::optional<std::int64_t> pad, Generator& gen)
    : num_embeddings(V), dim(D), padding_idx(pad) {
  if (V < 1 || D < 1) throw ValueError(fmt::format("Embedding: sizes must be positive, got {} x {}", V, D));
  if (pad && (*pad < -V || *pad >= V))
    throw IndexError(fmt::format("Embedding: padding_idx {} is out of range for {} embeddings", *pad, V));
  if (pad && *pad < 0) padding_idx = *pad + V;
  weight = register_parameter("weight", empty({V, D}));
  init::normal_(weight, 0.0, 1.0, gen);
  if (padding_idx) {
    NoGradGuard no_grad;
    Tensor row = narrow(weight, 0, *padding_idx, 1);
    fill_(row, 0.0);
  }
}

Tensor Embedding::forward(const Tensor& ids) { return embedding(weight, ids, padding_idx); }

LayerNorm::LayerNorm(std::int64_t D, double e, bool affine) : dim(D), eps(e) {
  if (D < 1) throw ValueError(fmt::format("LayerNorm: size must be positive, got {}", D));
  if (affine) {
    weight = register_parameter("weight", ones({D}));
    bias = register_parameter("bias", zeros({D}));
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  if (x.dim() < 1 || x.size(-1) != dim)
    throw ShapeError(fmt::format("LayerNorm expected [*, {}], got {}", dim, to_string(x.shape())));
  return layer_norm(x, weight, bias, eps);
}

Dropout::Dropout(double prob, Generator& gen) : p(prob), gen_(&gen) {
  if (!(p >= 0 && p <= 1)) throw ValueError(fmt::format("Dropout: p must be in [0, 1], got {}", p));
}
Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training(), *gen_); }

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor GELU::forward(const Tensor& x) { return gelu(x); }

Sequential::Sequential(std::vector<std::shared_ptr<UnaryModule>> layers) {
  for (auto& l : layers) push_back(std::move(l));
}
void Sequential::push_back(std::shared_ptr<UnaryModule> layer) {
  layers_.push_back(register_module(std::to_string(layers_.size()), std::move(layer)));
}
Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (auto& layer : layers_) y = (*layer)(y);
  return y;
}

}  // namespace stepformer::nn
