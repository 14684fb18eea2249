#include "nn/module.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/errors.h"

namespace stepformer::nn {

template <class F>
void Module::visit(const std::string& prefix, F&& f) const {
  f(prefix, *this);
  for (const auto& [name, child] : children_) child->visit(prefix + name + ".", f);
}

// A module registered under two names (one LayerNorm for three sublayers, one layer appended N times) holds
// the same tensors twice: each is listed once, under the first path that reaches it, as torch.nn.Module's
// named_parameters() does by default. So the optimizer steps it once, and parameter_count() falls short
// of a closed form that assumes distinct layers.
NamedTensors Module::named_parameters() const {
  NamedTensors out;
  std::set<const void*> seen;
  visit("", [&](const std::string& prefix, const Module& m) {
    for (const auto& [name, t] : m.parameters_)
      if (seen.insert(t.impl()).second) out.emplace_back(prefix + name, t);
  });
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  visit("", [&out](const std::string& prefix, const Module& m) {
    for (const auto& [name, t] : m.buffers_) out.emplace_back(prefix + name, t);
  });
  return out;
}

std::int64_t Module::parameter_count() const {
  std::int64_t n = 0;
  for (const Tensor& t : parameters()) n += t.numel();
  return n;
}

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& [name, t] : named_parameters()) out.emplace(name, t);
  for (auto& [name, t] : named_buffers()) out.emplace(name, t);
  return out;
}

LoadResult Module::load_state_dict(const StateDict& state, bool strict) {
  LoadResult result;
  std::vector<std::string> mismatched;
  StateDict mine = state_dict();
  for (const auto& [name, t] : mine) {
    auto it = state.find(name);
    if (it == state.end()) {
      result.missing.push_back(name);
    } else if (it->second.shape() != t.shape() || it->second.dtype() != t.dtype()) {
      mismatched.push_back(fmt::format("{}: expected {} {}, got {} {}", name, dtype_name(t.dtype()),
                                       to_string(t.shape()), dtype_name(it->second.dtype()),
                                       to_string(it->second.shape())));
    }
  }
  for (const auto& [name, t] : state)
    if (!mine.count(name)) result.unexpected.push_back(name);

  if (!mismatched.empty() || (strict && (!result.missing.empty() || !result.unexpected.empty()))) {
    std::string msg = "load_state_dict:";
    if (!mismatched.empty()) msg += fmt::format("\n  shape or dtype mismatch: {}", fmt::join(mismatched, "; "));
    if (!result.missing.empty()) msg += fmt::format("\n  missing keys: {}", fmt::join(result.missing, ", "));
    if (!result.unexpected.empty()) msg += fmt::format("\n  unexpected keys: {}", fmt::join(result.unexpected, ", "));
    throw CheckpointError(msg);
  }
  NoGradGuard no_grad;
  for (auto& [name, t] : mine) {
    auto it = state.find(name);
    if (it != state.end()) copy_(t, it->second.to(t.device()));
  }
  return result;
}

void Module::train(bool on) {
  visit("", [on](const std::string&, const Module& m) { const_cast<Module&>(m).training_ = on; });
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  for (auto& [name, t] : named_parameters()) {
    Tensor handle = t;
    handle.set_data(t.to(device));
  }
  for (auto& [name, t] : named_buffers()) {
    Tensor handle = t;
    handle.set_data(t.to(device));
  }
}

void Module::zero_grad() {
  for (Tensor& t : parameters()) t.zero_grad();
}

void Module::check_new_name(const std::string& name) const {
  if (name.empty() || name.find('.') != std::string::npos)
    throw ValueError(fmt::format("Module: '{}' is not a valid name (non-empty, no '.')", name));
  auto taken = [&name](const auto& list) {
    for (const auto& [n, v] : list)
      if (n == name) return true;
    return false;
  };
  if (taken(parameters_) || taken(buffers_) || taken(children_))
    throw ValueError(fmt::format("Module: the name '{}' is registered twice", name));
}

Tensor Module::register_parameter(std::string name, Tensor value) {
  check_new_name(name);
  if (!value.is_leaf()) value = value.detach();
  if (!value.requires_grad()) value.set_requires_grad(true);
  parameters_.emplace_back(std::move(name), value);
  return value;
}

Tensor Module::register_buffer(std::string name, Tensor value) {
  check_new_name(name);
  buffers_.emplace_back(std::move(name), value);
  return value;
}

void Module::add_child(std::string name, std::shared_ptr<Module> module) {
  check_new_name(name);
  if (!module) throw ValueError(fmt::format("Module: submodule '{}' is null", name));
  module->train(training_);
  module->set_path(path_->empty() ? name : *path_ + "." + name);
  children_.emplace_back(std::move(name), std::move(module));
}

void Module::set_path(const std::string& path) {
  path_ = std::make_shared<const std::string>(path);
  for (auto& [name, child] : children_) child->set_path(path + "." + name);
}

}  // namespace stepformer::nn
