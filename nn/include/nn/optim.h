#pragma once
// Optimizers, as torch.optim (same update order, so trajectories match PyTorch's to float32 rounding),
// and global-norm gradient clipping. Parameters without a gradient are skipped, as in PyTorch.
// Updates run under NoGradGuard and write the parameters in place.
#include <map>
#include <string>
#include <vector>

#include "autograd/backend.h"
#include "nn/module.h"

namespace stepformer::nn {

class Optimizer {
 public:
  Optimizer(NamedTensors params, double lr);  // e.g. Adam(model.named_parameters(), ...)
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual void step() = 0;
  void zero_grad();
  double lr() const { return lr_; }
  void set_lr(double lr);  // what a schedule calls before each step
  // A step replayed from a device graph (transformer::LMTrainer): the host ran none of step()'s code, so each
  // parameter with a gradient counts the step here, as step() does.
  void count_replayed_step();

  // The state as tensors: "<kind>.<parameter path>" (e.g. "exp_avg.encoder.w_q.weight") and
  // "step.<parameter path>" (int64). It is saved in checkpoints and restores an exact continuation.
  // Virtual: a sharded optimizer (chapter 10's ZeroAdam) gathers its shards into the same keys.
  virtual StateDict state_dict() const;
  virtual void load_state_dict(const StateDict& state);  // CheckpointError lists every missing or odd key

 protected:
  // The state tensor `kind` of parameter i: zeros like the parameter, made on first use.
  Tensor& state(const std::string& kind, std::size_t i);
  bool has_state(const std::string& kind, std::size_t i) const;

  NamedTensors params_;
  std::vector<std::int64_t> steps_;  // per parameter, as torch (a parameter may miss steps)
  double lr_;

 private:
  std::map<std::string, std::vector<Tensor>> state_;
};

// p -= lr * v, with v = momentum * v + (1 - dampening) * g (v = g on the first step), g += weight_decay * p
// first; Nesterov uses g + momentum * v instead of v (torch.optim.SGD).
class SGD : public Optimizer {
 public:
  struct Options {
    double lr = 0.01, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
    bool nesterov = false;
  };
  SGD(NamedTensors params, Options o);
  void step() override;

 private:
  Options o_;
};

// Kingma & Ba (2015); AdamW is Adam with decoupled weight decay (Loshchilov & Hutter, 2019).
// The paper's Transformer uses Adam with beta2 = 0.98, eps = 1e-9 (section 5.3).
class Adam : public Optimizer {
 public:
  struct Options {
    double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  };
  Adam(NamedTensors params, Options o) : Adam(std::move(params), o, false) {}
  void step() override;
  // From here on each step reads its lr and bias corrections 1 - beta1^t, 1 - beta2^t from `values` (float64 [3] on
  // the parameters' device) instead of set_lr's and its own step count, so that a training step recorded once as a
  // device graph takes each replay's (LMTrainer fills them on the device). Undefined: the host's again.
  void read_step_values_from(Tensor values) { step_values_ = std::move(values); }

 protected:
  Adam(NamedTensors params, Options o, bool decoupled);

 private:
  Options o_;
  bool decoupled_;
  Tensor step_values_;
};

class AdamW : public Adam {
 public:
  struct Options {
    double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;  // torch's default decay
  };
  AdamW(NamedTensors params, Options o)
      : Adam(std::move(params), {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay}, true) {}
};

// Scales all gradients by max_norm / (total + 1e-6) when their global 2-norm `total` exceeds max_norm
// (torch.nn.utils.clip_grad_norm_). Returns the norm before clipping, a float64 scalar on the gradients' device:
// nothing is read back to the host (call .item() to print it).
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);

}  // namespace stepformer::nn
