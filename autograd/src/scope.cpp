// Scopes (the module path in error messages) and the anomaly-mode switch.
#include "autograd/scope.h"

#include <atomic>
#include <vector>

#include "autograd/anomaly.h"
#include "autograd/errors.h"

namespace stepformer {

namespace {
thread_local std::vector<std::shared_ptr<const std::string>> scopes;
std::atomic<bool> anomaly{false};
}  // namespace

ScopeGuard::ScopeGuard(std::shared_ptr<const std::string> name) { scopes.push_back(std::move(name)); }
ScopeGuard::~ScopeGuard() { scopes.pop_back(); }

std::shared_ptr<const std::string> current_scope() { return scopes.empty() ? nullptr : scopes.back(); }

std::string with_scope(const std::string& message) {
  if (scopes.empty() || !scopes.back() || scopes.back()->empty()) return message;
  return *scopes.back() + ": " + message;
}

void set_detect_anomaly(bool on) { anomaly = on; }
bool detect_anomaly() { return anomaly; }

}  // namespace stepformer
