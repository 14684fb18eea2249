#pragma once
// Where in a model the engine is working. nn::Module pushes its dotted path ("encoder.layers.0.ffn")
// while its forward runs, so that any error raised inside names the module — "encoder.layers.0.ffn.w_1:
// Linear expected [*, 512], got [2, 7, 256]" — and anomaly mode can say where a NaN first appeared.
// The autograd engine knows nothing of modules: a scope is just a name on a per-thread stack.
#include <memory>
#include <string>

namespace stepformer {

class ScopeGuard {
 public:
  explicit ScopeGuard(std::shared_ptr<const std::string> name);
  ~ScopeGuard();
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;
};

// The innermost scope's name; null outside every scope.
std::shared_ptr<const std::string> current_scope();

// "<current scope>: <message>", or the message alone outside every scope (every Error's message).
std::string with_scope(const std::string& message);

}  // namespace stepformer
