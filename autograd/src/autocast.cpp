#include "autograd/autocast.h"

#include <memory>
#include <string>
#include <vector>

#include "autograd/errors.h"
#include "autograd/grad_mode.h"
#include "autograd/tensor.h"
#include "ops/common.h"

namespace stepformer {

namespace {
thread_local DType g_autocast = DType::float32;  // per thread, as torch.autocast
thread_local int g_depth = 0;                    // AutocastGuards alive on this thread

// One kept conversion: the source's memory as it was when converted, and the result.
struct Kept {
  std::weak_ptr<Storage> storage;  // expired: the source is gone, the entry can never match again
  std::uint64_t serial, version;
  std::int64_t offset;
  Shape shape, strides;
  Tensor converted;
  std::uint64_t converted_version;
};
thread_local std::vector<Kept> g_kept;

bool keeping(const Tensor& source, DType target) {
  return g_depth > 0 && target == g_autocast && target != DType::float32 && !grad_enabled() &&
         source.dtype() == DType::float32;
}
}  // namespace

DType autocast_dtype() { return g_autocast; }

namespace detail {
Tensor autocast_kept(const Tensor& source, DType target) {
  if (!keeping(source, target)) return {};
  const Storage& s = *source.impl()->storage;
  for (const Kept& k : g_kept)
    if (k.serial == s.serial && k.version == s.version && k.offset == source.offset() && k.shape == source.shape() &&
        k.strides == source.strides() && k.converted.dtype() == target && k.converted.version() == k.converted_version)
      return k.converted;
  return {};
}

void autocast_keep(const Tensor& source, const Tensor& converted) {
  if (!keeping(source, converted.dtype())) return;
  // Forget the conversions of tensors that are gone (a decoded token's activations) and of memory written since.
  std::erase_if(g_kept, [](const Kept& k) {
    const auto storage = k.storage.lock();
    return !storage || storage->version != k.version || k.converted.version() != k.converted_version;
  });
  const auto& storage = source.impl()->storage;
  g_kept.push_back({storage, storage->serial, storage->version, source.offset(), source.shape(), source.strides(),
                    converted, converted.version()});
}
}  // namespace detail

AutocastGuard::AutocastGuard(DType dtype, bool enabled) : previous_(g_autocast) {
  if (dtype != DType::bfloat16 && dtype != DType::float32)
    throw DTypeError("AutocastGuard: autocasts to bfloat16 (or float32, which is off), got " +
                     std::string(dtype_name(dtype)));
  if (enabled) g_autocast = dtype;
  ++g_depth;
}
AutocastGuard::~AutocastGuard() {
  g_autocast = previous_;
  if (--g_depth == 0) g_kept.clear();  // as torch.autocast: the cache ends with the outermost scope
}

}  // namespace stepformer
