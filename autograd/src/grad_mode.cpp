#include "autograd/grad_mode.h"

namespace stepformer {

namespace {
thread_local bool g_grad_enabled = true;  // per thread, as torch.no_grad()
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

}  // namespace stepformer
