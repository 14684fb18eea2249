#include "distributed/zero.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <utility>

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
  // EXERCISE 10.4: equal slices covering all total_ elements: shard_ each, rank r's from r * shard_
  shard_ = std::max<std::int64_t>(1, (total_ + ranks - 1) / ranks);  // ceil: the last slice is padded, never short
  begin_ = shard_ * comm_.rank();
  // END EXERCISE
  flat_ = zeros({shard_ * ranks});
  grad_shard_ = narrow(flat_, 0, begin_, shard_);
  exp_avg_ = zeros({shard_});
  exp_avg_sq_ = zeros({shard_});
  // Chunks of about 1 MB (DataParallel's bucket size), cut at every slice boundary, so each has one owner.
  constexpr std::int64_t kChunk = std::int64_t{1} << 18;
  for (std::int64_t at = 0; at < flat_.numel();) {
    chunk_start_.push_back(at);
    at = std::min({at + kChunk, (at / shard_ + 1) * shard_, flat_.numel()});
  }
  chunk_start_.push_back(flat_.numel());
  chunk_parameter_elements_.assign(chunk_start_.size() - 1, 0);
  for (std::size_t c = 0; c + 1 < chunk_start_.size(); ++c)  // the padding after the last parameter needs nothing
    chunk_parameter_elements_[c] = std::max<std::int64_t>(0, std::min(chunk_start_[c + 1], total_) - chunk_start_[c]);
  waiting_ = chunk_parameter_elements_;
  next_chunk_ = waiting_.size();
  packed_.assign(params_.size(), false);
  hooks_ = std::make_unique<GradientHooks>(params_, [this](std::size_t i) { on_gradient(i); });
}

void ZeroAdam::pack(std::size_t i) {
  NoGradGuard no_grad;
  const Tensor& p = params_[i].second;
  Tensor slot = narrow(flat_, 0, offsets_[i], p.numel());
  const Tensor g = p.grad();
  if (g.defined())
    copy_(slot, reshape(g, {p.numel()}));
  else
    zero_(slot);
  packed_[i] = true;
  const std::int64_t lo = offsets_[i], hi = offsets_[i] + p.numel();
  auto c =
      static_cast<std::size_t>(std::upper_bound(chunk_start_.begin(), chunk_start_.end(), lo) - chunk_start_.begin()) -
      1;
  for (; c + 1 < chunk_start_.size() && chunk_start_[c] < hi; ++c)
    waiting_[c] -= std::min(hi, chunk_start_[c + 1]) - std::max(lo, chunk_start_[c]);
}

void ZeroAdam::start_ready_chunks() {
  // Strictly in order, the same on every rank (MPI pairs collectives by order); last first, as backward fills them.
  while (next_chunk_ > 0 && waiting_[next_chunk_ - 1] == 0) {
    --next_chunk_;
    Tensor chunk =
        narrow(flat_, 0, chunk_start_[next_chunk_], chunk_start_[next_chunk_ + 1] - chunk_start_[next_chunk_]);
    comm_.start_reduce_sum(chunk, owner(chunk_start_[next_chunk_]));
  }
}

void ZeroAdam::on_gradient(std::size_t i) {
  if (packed_[i])
    throw DistributedError(fmt::format(
        "ZeroAdam: parameter '{}' got a second gradient before step(); run one backward per step", params_[i].first));
  pack(i);
  const std::size_t before = next_chunk_;
  start_ready_chunks();
  started_since_step_ += static_cast<std::int64_t>(before - next_chunk_);
  comm_.poll();  // MPI moves the started chunks' data only inside MPI calls
}

void ZeroAdam::step() {
  NoGradGuard no_grad;
  const std::int64_t lo = begin_, hi = begin_ + shard_;
  started_in_backward_ = std::exchange(started_since_step_, 0);
  // 1. Gradients no hook packed (no backward since the last step, or none reached the parameter) are packed now,
  // the chunks not started yet started; once all are done, grad_shard_ holds the sum over ranks of this slice.
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (!packed_[i]) pack(i);
  start_ready_chunks();
  comm_.wait_all();
  // 2. The global norm: each rank's slice holds a disjoint part of the summed gradient.
  if (clip_norm_ > 0) {
    // EXERCISE 10.3: norm_ = 2-norm of the whole summed gradient; clip as
    // clip_grad_norm_
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
    adam_update_(p, g, m, v, {lr_, o_.beta1, o_.beta2, o_.eps, o_.weight_decay, false, steps_[i], {}});
    params_[i].second.bump_version();
  }
  // 4. Each parameter's part from the rank that owns it to every rank, in parameter order on every rank.
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const std::int64_t end = offsets_[i] + params_[i].second.numel();
    for (std::int64_t at = offsets_[i]; at < end;) {
      const std::int64_t upto = std::min(end, (at / shard_ + 1) * shard_);
      Tensor part = narrow(flat_view(params_[i].second), 0, at - offsets_[i], upto - at);
      comm_.start_broadcast(part, owner(at));
      at = upto;
    }
    params_[i].second.bump_version();
  }
  comm_.wait_all();
  packed_.assign(params_.size(), false);
  waiting_ = chunk_parameter_elements_;
  next_chunk_ = waiting_.size();
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
