#include "distributed/data_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace stepformer::distributed {

namespace {

// FNV-1a over every parameter's name, shape and dtype: equal on two ranks when they built the same model.
std::int64_t fingerprint(const nn::NamedTensors& params) {
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  };
  for (const auto& [name, p] : params) mix(fmt::format("{} {} {};", name, to_string(p.shape()), dtype_name(p.dtype())));
  return static_cast<std::int64_t>(h);
}

void check_same_model(const nn::NamedTensors& params, Communicator& comm) {
  const auto counts = comm.all_gather(static_cast<std::int64_t>(params.size()));
  const auto prints = comm.all_gather(fingerprint(params));
  for (int r = 1; r < comm.size(); ++r)
    if (counts[r] != counts[0] || prints[r] != prints[0])
      throw DistributedError(fmt::format(
          "broadcast_parameters: rank {} built a different model from rank 0's ({} parameters vs {}{}): every rank "
          "must "
          "construct the same model with the same configuration",
          r, counts[r], counts[0], counts[r] == counts[0] ? ", with different names, shapes or dtypes" : ""));
}

}  // namespace

GradientHooks::GradientHooks(nn::NamedTensors params, const std::function<void(std::size_t)>& on_gradient)
    : params_(std::move(params)) {
  for (std::size_t i = 0; i < params_.size(); ++i)
    handles_.push_back(
        params_[i].second.register_post_accumulate_grad_hook([on_gradient, i](const Tensor&) { on_gradient(i); }));
}

GradientHooks::~GradientHooks() {
  for (std::size_t i = 0; i < handles_.size(); ++i) params_[i].second.remove_post_accumulate_grad_hook(handles_[i]);
}

void broadcast_parameters(nn::Module& model, Communicator& comm) {
  nn::NamedTensors params = model.named_parameters();
  check_same_model(params, comm);
  for (auto& [name, p] : params)
    if (p.device() != kCPU || !p.is_contiguous())
      throw DistributedError(fmt::format("DataParallel: parameter '{}' must be a contiguous CPU tensor (it is on {})",
                                         name, device_name(p.device())));
  for (auto& [name, p] : params) comm.broadcast(p, 0);
  for (auto& [name, b] : model.named_buffers()) comm.broadcast(b, 0);
}

DataParallel::DataParallel(nn::Module& model, Communicator& comm, DataParallelOptions o)
    : comm_(comm), o_(o), params_(model.named_parameters()) {
  broadcast_parameters(model, comm_);
  // Buckets in reverse registration order, closed when full or when the dtype changes.
  const std::size_t n = params_.size();
  bucket_of_.resize(n);
  slot_of_.resize(n);
  packed_.assign(n, false);
  std::size_t bytes = 0;
  for (std::size_t k = n; k-- > 0;) {
    const Tensor& p = params_[k].second;
    const std::size_t size = static_cast<std::size_t>(p.numel()) * element_size(p.dtype());
    if (buckets_.empty() || bytes + size > o_.bucket_bytes ||
        params_[buckets_.back().params.front()].second.dtype() != p.dtype()) {
      buckets_.emplace_back();  // a parameter larger than bucket_bytes gets a bucket of its own
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    bucket_of_[k] = buckets_.size() - 1;
    slot_of_[k] = b.params.size();
    b.offsets.push_back(b.params.empty() ? 0 : b.offsets.back() + params_[b.params.back()].second.numel());
    b.params.push_back(k);
    bytes += size;
  }
  for (Bucket& b : buckets_) {
    const Tensor& last = params_[b.params.back()].second;
    b.flat = zeros({b.offsets.back() + last.numel()}, {last.dtype()});
  }
  ready_count_.assign(buckets_.size(), 0);
  hooks_ = std::make_unique<GradientHooks>(params_, [this](std::size_t k) { on_gradient(k); });
}

void DataParallel::pack(std::size_t k) {
  NoGradGuard no_grad;
  const Tensor& p = params_[k].second;
  Bucket& b = buckets_[bucket_of_[k]];
  Tensor slot = narrow(b.flat, 0, b.offsets[slot_of_[k]], p.numel());
  const Tensor g = p.grad();
  copy_(slot, g.defined() ? reshape(g, {p.numel()}) : zeros({p.numel()}, {p.dtype()}));
  packed_[k] = true;
  ++ready_count_[bucket_of_[k]];
}

void DataParallel::on_gradient(std::size_t k) {
  if (packed_[k])
    throw DistributedError(fmt::format(
        "DataParallel: parameter '{}' got a second gradient before synchronize_gradients(); run one backward per "
        "step and synchronize after it",
        params_[k].first));
  // EXERCISE 10.1: pack(k); with overlap, start full buckets in order, next_to_start_ on
  pack(k);
  if (!o_.overlap) return;
  while (next_to_start_ < buckets_.size() && ready_count_[next_to_start_] == buckets_[next_to_start_].params.size()) {
    comm_.start_all_reduce_sum(buckets_[next_to_start_].flat);
    current_started_.push_back(next_to_start_++);
  }
  comm_.poll();  // MPI moves the started buckets' data only inside MPI calls
  // END EXERCISE
}

void DataParallel::synchronize_gradients() {
  const auto start = std::chrono::steady_clock::now();
  started_in_backward_ = std::move(current_started_);
  current_started_.clear();
  for (std::size_t b = next_to_start_; b < buckets_.size(); ++b) {
    for (std::size_t k : buckets_[b].params)
      if (!packed_[k]) pack(k);  // no gradient reached it on this rank: it sends zeros
    comm_.start_all_reduce_sum(buckets_[b].flat);
  }
  comm_.wait_all();
  NoGradGuard no_grad;
  for (std::size_t k = 0; k < params_.size(); ++k) {
    Tensor& p = params_[k].second;
    const Bucket& b = buckets_[bucket_of_[k]];
    const Tensor sum = reshape(narrow(b.flat, 0, b.offsets[slot_of_[k]], p.numel()), p.shape());
    if (!p.grad().defined()) p.impl()->grad = empty_like(p);
    Tensor g = p.grad();
    copy_(g, sum);
  }
  packed_.assign(params_.size(), false);
  ready_count_.assign(buckets_.size(), 0);
  next_to_start_ = 0;
  seconds_waiting_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace stepformer::distributed
