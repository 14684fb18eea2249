#pragma once
// The layers the Transformer is built from. Semantics and default initialisation follow torch.nn.
#include <optional>

#include "autograd/random.h"
#include "nn/module.h"

namespace stepformer::nn {

// y = x W^T + b, W [out, in] (PyTorch's layout). Init as torch.nn.Linear: W ~ kaiming_uniform(a=sqrt(5)),
// which is U(-1/sqrt(in), 1/sqrt(in)), and b ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public UnaryModule {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) override;  // [*, in] -> [*, out]

  std::int64_t in_features, out_features;
  Tensor weight;  // [out, in]
  Tensor bias;    // [out], or undefined
};

// A lookup table of V vectors of size D. Init N(0, 1) as torch.nn.Embedding; the padding row is zero
// and receives no gradient.
class Embedding : public CallableModule<Embedding> {
 public:
  Embedding(std::int64_t num_embeddings, std::int64_t dim, std::optional<std::int64_t> padding_idx = std::nullopt,
            Generator& gen = default_generator());
  Tensor forward(const Tensor& ids);  // int64 [*] -> [*, D]

  std::int64_t num_embeddings, dim;
  std::optional<std::int64_t> padding_idx;
  Tensor weight;  // [V, D]
};

// Normalises the last dim (Ba et al. 2016): weight = 1, bias = 0 at init, as torch.nn.LayerNorm.
class LayerNorm : public UnaryModule {
 public:
  explicit LayerNorm(std::int64_t dim, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;  // [*, D] -> [*, D]

  std::int64_t dim;
  double eps;
  Tensor weight, bias;  // [D] each, or undefined without affine
};

// Zeroes elements with probability p in training (scaling the rest by 1/(1-p)); identity in eval.
class Dropout : public UnaryModule {
 public:
  explicit Dropout(double p = 0.5, Generator& gen = default_generator());
  Tensor forward(const Tensor& x) override;

  double p;

 private:
  Generator* gen_;
};

class ReLU : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};

class GELU : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;
};

// Applies its layers in order; they are named "0", "1", ... as in torch.nn.Sequential.
class Sequential : public UnaryModule {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<UnaryModule>> layers);
  void push_back(std::shared_ptr<UnaryModule> layer);
  Tensor forward(const Tensor& x) override;
  std::size_t size() const { return layers_.size(); }

 private:
  std::vector<std::shared_ptr<UnaryModule>> layers_;
};

// A list of submodules of one type, named "0", "1", ... (the N layers of an encoder).
template <class M>
class ModuleList : public Module {
 public:
  void push_back(std::shared_ptr<M> module) {
    items_.push_back(register_module(std::to_string(items_.size()), std::move(module)));
  }
  M& operator[](std::size_t i) { return *items_.at(i); }
  std::size_t size() const { return items_.size(); }
  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }

 private:
  std::vector<std::shared_ptr<M>> items_;
};

}  // namespace stepformer::nn
