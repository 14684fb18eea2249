#include "autograd/autocast.h"

#include <string>

#include "autograd/errors.h"

namespace stepformer {

namespace {
thread_local DType g_autocast = DType::float32;  // per thread, as torch.autocast
}  // namespace

DType autocast_dtype() { return g_autocast; }

AutocastGuard::AutocastGuard(DType dtype, bool enabled) : previous_(g_autocast) {
  if (dtype != DType::bfloat16 && dtype != DType::float32)
    throw DTypeError("AutocastGuard: autocasts to bfloat16 (or float32, which is off), got " +
                     std::string(dtype_name(dtype)));
  if (enabled) g_autocast = dtype;
}
AutocastGuard::~AutocastGuard() { g_autocast = previous_; }

}  // namespace stepformer
