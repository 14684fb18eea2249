// Scopes: the module path in error messages.
#include "autograd/scope.h"

#include <vector>

#include "autograd/errors.h"

namespace stepformer {

namespace {
thread_local std::vector<std::shared_ptr<const std::string>> scopes;
}  // namespace

ScopeGuard::ScopeGuard(std::shared_ptr<const std::string> name) { scopes.push_back(std::move(name)); }
ScopeGuard::~ScopeGuard() { scopes.pop_back(); }

std::shared_ptr<const std::string> current_scope() { return scopes.empty() ? nullptr : scopes.back(); }

std::string with_scope(const std::string& message) {
  if (scopes.empty() || !scopes.back() || scopes.back()->empty()) return message;
  return *scopes.back() + ": " + message;
}

}  // namespace stepformer
