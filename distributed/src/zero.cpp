#include "distributed/zero.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/errors.h"

namespace stepformer::distributed {

namespace {
Tensor flat_view(const Tensor& p) { return reshape(p, {p.numel()}); }  // a view: parameters are contiguous

// As nn::clip_grad_norm_: squares in float32, summed in double; a million elements at a time, so that the
// temporary stays small next to a shard of the whole model.
double sum_of_squares(const Tensor& v) {
  constexpr std::int64_t kChunk = 1 << 20;
  double total = 0;
  for (std::int64_t at = 0; at < v.numel(); at += kChunk) {
    const Tensor c = narrow(v, 0, at, std::min(kChunk, v.numel() - at));
    total += sum(c * c).item();
  }
  return total;
}
}  // namespace

ZeroAdam::ZeroAdam(nn::NamedTensors params, Communicator& comm, nn::Adam::Options o, double clip_norm)
    : Optimizer(std::move(params), o.lr), comm_(comm), o_(o), clip_norm_(clip_norm) {
  for (const auto& [name, p] : params_) {
    if (p.device() != kCPU || !p.is_contiguous() || p.dtype() != DType::float32)
      throw DistributedError(
          fmt::format("ZeroAdam: parameter '{}' must be a contiguous float32 CPU tensor, got {} on {}", name,
                      dtype_name(p.dtype()), device_name(p.device())));
    offsets_.push_back(total_);
    total_ += p.numel();
  }
  const std::int64_t ranks = comm_.size();
  shard_ = (total_ + ranks - 1) / ranks;
  begin_ = shard_ * comm_.rank();
  flat_ = zeros({shard_ * ranks});
  grad_shard_ = zeros({shard_});
  exp_avg_ = zeros({shard_});
  exp_avg_sq_ = zeros({shard_});
}

void ZeroAdam::step() {
  NoGradGuard no_grad;
  const std::int64_t lo = begin_, hi = begin_ + shard_;
  // 1. Every gradient into the flat vector (zeros where a parameter has none), summed slice by slice.
  zero_(flat_);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = params_[i].second.grad();
    if (g.defined()) {
      Tensor slot = narrow(flat_, 0, offsets_[i], g.numel());
      copy_(slot, reshape(g, {g.numel()}));
    }
  }
  comm_.reduce_scatter_sum(flat_, grad_shard_);
  // 2. The global norm: each rank's slice holds a disjoint part of the summed gradient.
  if (clip_norm_ > 0) {
    // EXERCISE 10.3 (4 points, needs 0.1 0.2 0.5): norm_ = 2-norm of the whole summed gradient; clip as clip_grad_norm_
    norm_ = std::sqrt(comm_.all_reduce_sum(sum_of_squares(grad_shard_)));
    const double coef = clip_norm_ / (norm_ + 1e-6);
    if (coef < 1) copy_(grad_shard_, grad_shard_ * coef);
    // END EXERCISE
  }
  // 3. Adam on this rank's slice of every parameter it overlaps; every rank counts every parameter's steps.
  for (std::size_t i = 0; i < params_.size(); ++i) {
    ++steps_[i];
    const std::int64_t start = std::max(offsets_[i], lo), end = std::min(offsets_[i] + params_[i].second.numel(), hi);
    if (start >= end) continue;
    Tensor p = narrow(flat_view(params_[i].second), 0, start - offsets_[i], end - start);
    const Tensor g = narrow(grad_shard_, 0, start - lo, end - start);
    Tensor m = narrow(exp_avg_, 0, start - lo, end - start), v = narrow(exp_avg_sq_, 0, start - lo, end - start);
    adam_update_(p, g, m, v, {lr_, o_.beta1, o_.beta2, o_.eps, o_.weight_decay, false, steps_[i]});
    params_[i].second.bump_version();
  }
  // 4. Every rank's updated slice to every rank (grad_shard_ is free again and carries them).
  zero_(grad_shard_);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const std::int64_t start = std::max(offsets_[i], lo), end = std::min(offsets_[i] + params_[i].second.numel(), hi);
    if (start >= end) continue;
    Tensor slot = narrow(grad_shard_, 0, start - lo, end - start);
    copy_(slot, narrow(flat_view(params_[i].second), 0, start - offsets_[i], end - start));
  }
  comm_.all_gather(grad_shard_, flat_);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    copy_(p, reshape(narrow(flat_, 0, offsets_[i], p.numel()), p.shape()));
  }
}

nn::StateDict ZeroAdam::state_dict() const {
  nn::StateDict out;
  const bool stepped = std::any_of(steps_.begin(), steps_.end(), [](std::int64_t s) { return s > 0; });
  for (std::size_t i = 0; i < params_.size(); ++i)
    out.emplace("step." + params_[i].first, scalar(static_cast<double>(steps_[i]), {DType::int64}));
  if (!stepped) return out;  // as nn::Adam: no moments before the first step
  for (const auto& [kind, shard] : {std::pair{"exp_avg", exp_avg_}, std::pair{"exp_avg_sq", exp_avg_sq_}}) {
    Tensor whole = zeros({flat_.numel()});
    comm_.all_gather(shard, whole);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const Tensor& p = params_[i].second;
      out.emplace(std::string(kind) + "." + params_[i].first,
                  contiguous(reshape(narrow(whole, 0, offsets_[i], p.numel()), p.shape())));
    }
  }
  return out;
}

void ZeroAdam::load_state_dict(const nn::StateDict& state) {
  std::vector<std::string> problems;
  std::vector<std::int64_t> steps(params_.size(), 0);
  std::size_t expected = params_.size();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    auto step = state.find("step." + params_[i].first);
    if (step == state.end())
      problems.push_back("missing step." + params_[i].first);
    else
      steps[i] = static_cast<std::int64_t>(step->second.item());
  }
  NoGradGuard no_grad;
  const std::int64_t lo = begin_, hi = begin_ + shard_;
  Tensor m = zeros({shard_}), v = zeros({shard_});
  const bool stepped = std::any_of(steps.begin(), steps.end(), [](std::int64_t s) { return s > 0; });
  for (const auto& [kind, target] : {std::pair{"exp_avg", &m}, std::pair{"exp_avg_sq", &v}}) {
    if (!stepped) break;
    expected += params_.size();
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const Tensor& p = params_[i].second;
      const std::string key = std::string(kind) + "." + params_[i].first;
      auto it = state.find(key);
      if (it == state.end() || it->second.shape() != p.shape() || it->second.dtype() != p.dtype()) {
        problems.push_back(it == state.end()
                               ? "missing " + key
                               : fmt::format("{}: expected float32 {}, got {} {}", key, to_string(p.shape()),
                                             dtype_name(it->second.dtype()), to_string(it->second.shape())));
        continue;
      }
      const std::int64_t start = std::max(offsets_[i], lo), end = std::min(offsets_[i] + p.numel(), hi);
      if (start >= end) continue;
      Tensor slot = narrow(*target, 0, start - lo, end - start);
      copy_(slot, narrow(contiguous(reshape(it->second.cpu(), {p.numel()})), 0, start - offsets_[i], end - start));
    }
  }
  if (problems.empty() && state.size() != expected)
    problems.push_back(fmt::format("{} entries, expected {} (unexpected keys)", state.size(), expected));
  if (!problems.empty()) throw nn::CheckpointError(fmt::format("ZeroAdam state: {}", fmt::join(problems, "; ")));
  steps_ = std::move(steps);
  copy_(exp_avg_, m);
  copy_(exp_avg_sq_, v);
}

}  // namespace stepformer::distributed
