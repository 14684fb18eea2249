#include "nn/optim.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/errors.h"

namespace stepformer::nn {

Optimizer::Optimizer(NamedTensors params, double lr) : params_(std::move(params)), steps_(params_.size(), 0) {
  for (const auto& [name, p] : params_)
    if (!p.requires_grad()) throw ValueError(fmt::format("optimizer: parameter '{}' does not require grad", name));
  set_lr(lr);
}

void Optimizer::set_lr(double lr) {
  if (!(lr >= 0)) throw ValueError(fmt::format("optimizer: learning rate must be >= 0, got {}", lr));
  lr_ = lr;
}

void Optimizer::zero_grad() {
  for (auto& [name, p] : params_) p.zero_grad();
}

void Optimizer::count_replayed_step() {
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (params_[i].second.grad().defined()) ++steps_[i];
}

bool Optimizer::has_state(const std::string& kind, std::size_t i) const {
  auto it = state_.find(kind);
  return it != state_.end() && it->second[i].defined();
}

Tensor& Optimizer::state(const std::string& kind, std::size_t i) {
  auto& slots = state_[kind];
  if (slots.empty()) slots.resize(params_.size());
  if (!slots[i].defined()) slots[i] = zeros_like(params_[i].second);
  return slots[i];
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_[i].first;
    out.emplace("step." + name, scalar(static_cast<double>(steps_[i]), {DType::int64}));
    for (const auto& [kind, slots] : state_)
      if (slots[i].defined()) out.emplace(kind + "." + name, slots[i]);
  }
  return out;
}

void Optimizer::load_state_dict(const StateDict& state) {
  std::vector<std::string> problems;
  std::map<std::string, std::vector<Tensor>> loaded;
  std::vector<std::int64_t> steps(params_.size(), 0);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    auto step = state.find("step." + name);
    if (step == state.end()) {
      problems.push_back("missing step." + name);
      continue;
    }
    steps[i] = static_cast<std::int64_t>(step->second.item());
  }
  for (const auto& [key, t] : state) {
    const auto dot = key.find('.');
    const std::string kind = key.substr(0, dot), name = dot == std::string::npos ? "" : key.substr(dot + 1);
    if (kind == "step") continue;
    std::size_t i = 0;
    while (i < params_.size() && params_[i].first != name) ++i;
    if (i == params_.size()) {
      problems.push_back("unexpected " + key);
      continue;
    }
    if (t.shape() != params_[i].second.shape() || t.dtype() != params_[i].second.dtype()) {
      problems.push_back(fmt::format("{}: expected {} {}, got {} {}", key, dtype_name(params_[i].second.dtype()),
                                     to_string(params_[i].second.shape()), dtype_name(t.dtype()),
                                     to_string(t.shape())));
      continue;
    }
    auto& slots = loaded[kind];
    if (slots.empty()) slots.resize(params_.size());
    slots[i] = empty_like(params_[i].second);  // a fresh copy: updates must not write into the caller's
    NoGradGuard no_grad;
    copy_(slots[i], t.to(slots[i].device()));
  }
  if (!problems.empty()) throw CheckpointError(fmt::format("optimizer state: {}", fmt::join(problems, "; ")));
  state_ = std::move(loaded);
  steps_ = std::move(steps);
}

SGD::SGD(NamedTensors params, Options o) : Optimizer(std::move(params), o.lr), o_(o) {
  if (o.momentum < 0 || o.weight_decay < 0) throw ValueError("SGD: momentum and weight_decay must be >= 0");
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    throw ValueError("SGD: Nesterov momentum needs momentum > 0 and dampening = 0");
}

void SGD::step() {
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    if (!p.grad().defined()) continue;
    Tensor g = p.grad();
    if (o_.weight_decay != 0) g = g + p * o_.weight_decay;
    if (o_.momentum != 0) {
      const bool first = !has_state("momentum_buffer", i);
      Tensor& buf = state("momentum_buffer", i);
      copy_(buf, first ? g : buf * o_.momentum + g * (1.0 - o_.dampening));
      g = o_.nesterov ? g + buf * o_.momentum : buf;
    }
    add_(p, g, -lr_);
    ++steps_[i];
  }
}

Adam::Adam(NamedTensors params, Options o, bool decoupled)
    : Optimizer(std::move(params), o.lr), o_(o), decoupled_(decoupled) {
  if (!(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1))
    throw ValueError(fmt::format("Adam: betas must be in [0, 1), got ({}, {})", o.beta1, o.beta2));
  if (!(o.eps >= 0 && o.weight_decay >= 0)) throw ValueError("Adam: eps and weight_decay must be >= 0");
}

void Adam::step() {
  NoGradGuard no_grad;
  // The parameters with a gradient, grouped by their step count (the same for all unless some had no gradient at
  // some step): one adam_update_ per group, which a GPU runs in a launch per 16 parameters.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (params_[i].second.grad().defined()) order.push_back(i);
  std::vector<bool> done(params_.size(), false);
  for (const std::size_t first : order) {
    if (done[first]) continue;
    const std::int64_t step = steps_[first] + 1;
    std::vector<Tensor> p, g, m, v;
    for (const std::size_t i : order) {
      if (done[i] || steps_[i] + 1 != step) continue;
      p.push_back(params_[i].second);
      g.push_back(contiguous(params_[i].second.grad()));
      m.push_back(state("exp_avg", i));
      v.push_back(state("exp_avg_sq", i));
      ++steps_[i];
      done[i] = true;
    }
    adam_update_(p, g, m, v, AdamConfig{lr_, o_.beta1, o_.beta2, o_.eps, o_.weight_decay, decoupled_, step, {}},
                 step_values_);
  }
}

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  if (!(max_norm > 0)) throw ValueError(fmt::format("clip_grad_norm_: max_norm must be positive, got {}", max_norm));
  NoGradGuard no_grad;
  // The squares of each gradient summed (one kernel for many on a GPU: sum_of_squares), then their total, in float64.
  std::vector<std::pair<DType, std::vector<Tensor>>> grads;  // by dtype, in the order the parameters come
  for (const Tensor& p : params) {
    if (!p.grad().defined()) continue;
    const DType dtype = p.grad().dtype();
    auto group = std::find_if(grads.begin(), grads.end(), [&](const auto& g) { return g.first == dtype; });
    if (group == grads.end()) group = grads.insert(grads.end(), {dtype, {}});
    group->second.push_back(p.grad());
  }
  if (grads.empty()) return scalar(0.0, {DType::float64, params.empty() ? default_device() : params[0].device()});
  std::vector<Tensor> squares;
  for (const auto& [dtype, group] : grads) squares.push_back(sum_of_squares(group));
  const Tensor total = sqrt(sum(squares.size() == 1 ? squares[0] : cat(squares, 0)));
  // Computed on the device and never read back (as PyTorch does): min(1, max_norm / (total + 1e-6)) scales
  // every gradient, by exactly 1 when the norm is within max_norm, and the host never waits for the norm.
  const Tensor coef = max_norm / (total + 1e-6);
  const Tensor one = scalar(1.0, {DType::float64, coef.device()});
  const Tensor clipped = where(lt(coef, one), coef, one);
  for (auto& [dtype, group] : grads) mul_(group, clipped.to(dtype));  // in place: the handles share p.grad()'s memory
  return total;
}

}  // namespace stepformer::nn
