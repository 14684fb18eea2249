#pragma once
// Module: a layer or model that owns named parameters, buffers and submodules, as torch.nn.Module.
//
// Registration is explicit: a module's constructor calls register_parameter / register_buffer /
// register_module for every tensor and sublayer it owns, and keeps the returned handle as a member:
//
//   Linear::Linear(...) { weight = register_parameter("weight", ...); }
//   Attention::Attention(...) { w_q = register_module("w_q", std::make_shared<Linear>(...)); }
//
// Paths are dotted, as PyTorch's: "encoder.layers.0.self_attn.w_q.weight".
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/scope.h"
#include "autograd/tensor.h"

namespace stepformer::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using StateDict = std::map<std::string, Tensor>;

// What load_state_dict found; with strict loading any missing or unexpected key is an error instead.
struct LoadResult {
  std::vector<std::string> missing;     // in the module, not in the state dict
  std::vector<std::string> unexpected;  // in the state dict, not in the module
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;  // a module owns its parameters: copies would silently share them
  Module& operator=(const Module&) = delete;

  NamedTensors named_parameters() const;  // each tensor once, under the first path that reaches it
  std::vector<Tensor> parameters() const;
  NamedTensors named_buffers() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  std::int64_t parameter_count() const;

  // Parameters and buffers by path (the tensors themselves, not copies).
  StateDict state_dict() const;
  // Copies values in (shapes and dtypes must match; every problem is listed in one CheckpointError).
  LoadResult load_state_dict(const StateDict& state, bool strict = true);

  void train(bool on = true);  // propagates to submodules
  void eval() { train(false); }
  bool is_training() const { return training_; }

  void to(Device device);  // moves parameters and buffers in place (every handle sees the move)
  void zero_grad();

  // The dotted path from the outermost module ("encoder.layers.0.ffn"; "" for the outermost itself).
  const std::string& path() const { return *path_; }

  // While the guard lives, errors raised inside start with this module's path and anomaly mode reports it
  // (autograd/scope.h). Calling a module (CallableModule, UnaryModule) takes one around forward; an entry
  // point other than forward (a decoder's one-token step) takes its own.
  ScopeGuard enter_scope() const { return ScopeGuard(path_); }

 protected:
  Tensor register_parameter(std::string name, Tensor value);  // marks it requires_grad
  Tensor register_buffer(std::string name, Tensor value);     // state, not trained (e.g. the PE table)
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    add_child(std::move(name), module);
    return module;
  }

 private:
  void add_child(std::string name, std::shared_ptr<Module> module);
  void set_path(const std::string& path);  // this module's and, recursively, its children's
  void check_new_name(const std::string& name) const;
  template <class F>
  void visit(const std::string& prefix, F&& f) const;

  NamedTensors parameters_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::shared_ptr<const std::string> path_ = std::make_shared<const std::string>();
};

// Calling a module, `module(args...)`, runs its forward(args...) inside the module's scope, as PyTorch's
// Module.__call__ wraps forward: forward bodies hold only the model, and an error raised anywhere inside
// names the module ("decoder.layers.1.ffn.w_1: Linear expected ..."). A module whose forward takes any
// arguments derives from CallableModule<itself> (C++20 has no `this` deduction; this is the CRTP spelling).
template <class Self>
class CallableModule : public Module {
 public:
  template <class... Args>
  decltype(auto) operator()(Args&&... args) {
    const ScopeGuard scope = enter_scope();
    return static_cast<Self&>(*this).forward(std::forward<Args>(args)...);
  }
};

// A module with one tensor in and one out (layers that Sequential can chain).
class UnaryModule : public Module {
 public:
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) {
    const ScopeGuard scope = enter_scope();
    return forward(x);
  }
};

}  // namespace stepformer::nn
