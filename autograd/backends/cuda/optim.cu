// Fused Adam / AdamW: the per-element formula is ../elementwise_math.h's adam_element, shared with the CPU
// and reference backends.
//
// Mapping: one thread per parameter element, grid-stride. Each thread reads p, g, m, v once and writes
// p, m, v once: one pass over memory instead of the ~10 an unfused update would make. adam_update_many does the
// same for up to 16 parameters in one launch (as PyTorch's multi_tensor_apply does for its foreach Adam): their
// addresses and sizes travel in the kernel's arguments, one row of blocks (blockIdx.y) per parameter, so a step
// launches once per 16 parameters instead of once per parameter, with no table to copy to the device first.
// scale_many (clip_grad_norm_'s scaling) launches the same way.
#include <algorithm>

#include "cuda_backend.h"
#include "device_utils.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

template <class T>
__global__ void adam_kernel(T* p, const T* g, T* m, T* v, std::int64_t n, AdamStep step, const double* values) {
  const AdamStep s = at_step_values(step, values);
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) adam_element(p[i], g[i], m[i], v[i], s);
}

constexpr int kGroup = 16;
template <class T>
struct AdamGroup {
  T* p[kGroup];
  const T* g[kGroup];
  T* m[kGroup];
  T* v[kGroup];
  std::int64_t n[kGroup];
};

template <class T>
__global__ void adam_group_kernel(AdamGroup<T> group, AdamStep step, const double* values) {
  const AdamStep s = at_step_values(step, values);
  const int t = static_cast<int>(blockIdx.y);
  for (std::int64_t i = global_thread(); i < group.n[t]; i += grid_threads())
    adam_element(group.p[t][i], group.g[t][i], group.m[t][i], group.v[t][i], s);
}

template <class T>
struct ScaleGroup {
  T* x[kGroup];
  std::int64_t n[kGroup];
};

template <class T>
__global__ void scale_group_kernel(ScaleGroup<T> group, const T* factor) {
  const int t = static_cast<int>(blockIdx.y);
  const T f = *factor;
  for (std::int64_t i = global_thread(); i < group.n[t]; i += grid_threads()) group.x[t][i] = group.x[t][i] * f;
}

}  // namespace

bool CudaBackend::scale_many(const std::vector<TensorDesc>& tensors, const TensorDesc& factor) {
  if (tensors.empty()) return true;
  if (tensors[0].dtype != DType::float32 && tensors[0].dtype != DType::float64) return false;
  dispatch_floating(tensors[0].dtype, "scale_many", [&](auto z) {
    using T = decltype(z);
    for (std::size_t first = 0; first < tensors.size(); first += kGroup) {
      ScaleGroup<T> args{};
      std::int64_t largest = 0;
      int count = 0;
      for (std::size_t i = first; i < tensors.size() && count < kGroup; ++i, ++count) {
        args.x[count] = static_cast<T*>(tensors[i].data);
        args.n[count] = tensors[i].numel();
        largest = std::max(largest, args.n[count]);
      }
      if (largest == 0) continue;
      launch(scale_group_kernel<T>, dim3(blocks_for(largest, 256), static_cast<unsigned>(count)), 256u, 0, args,
             static_cast<const T*>(factor.data));
    }
  });
  return true;
}

void CudaBackend::adam_update_many(const std::vector<AdamTensors>& group, const AdamConfig& cfg) {
  if (group.empty()) return;
  dispatch_floating(group[0].param.dtype, "adam_update", [&](auto z) {
    using T = decltype(z);
    for (std::size_t first = 0; first < group.size(); first += kGroup) {
      AdamGroup<T> args{};
      std::int64_t largest = 0;
      int count = 0;
      for (std::size_t i = first; i < group.size() && count < kGroup; ++i, ++count) {
        const AdamTensors& t = group[i];
        args.p[count] = static_cast<T*>(t.param.data), args.g[count] = static_cast<const T*>(t.grad.data);
        args.m[count] = static_cast<T*>(t.m.data), args.v[count] = static_cast<T*>(t.v.data);
        args.n[count] = t.param.numel();
        largest = std::max(largest, args.n[count]);
      }
      if (largest == 0) continue;
      launch(adam_group_kernel<T>, dim3(blocks_for(largest, 256), static_cast<unsigned>(count)), 256u, 0, args,
             adam_step(cfg), static_cast<const double*>(cfg.step_values.data));
    }
  });
}

void CudaBackend::adam_update(const TensorDesc& param, const TensorDesc& grad, const TensorDesc& m, const TensorDesc& v,
                              const AdamConfig& cfg) {
  const std::int64_t n = param.numel();
  if (n == 0) return;
  dispatch_floating(param.dtype, "adam_update", [&](auto t) {
    using T = decltype(t);
    launch(adam_kernel<T>, blocks_for(n, 256), 256u, 0, static_cast<T*>(param.data), static_cast<const T*>(grad.data),
           static_cast<T*>(m.data), static_cast<T*>(v.data), n, adam_step(cfg),
           static_cast<const double*>(cfg.step_values.data));
  });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
