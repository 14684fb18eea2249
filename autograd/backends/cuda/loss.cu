// Fused cross-entropy over contiguous rows of C logits, with label smoothing and an ignored target; the
// formulas are ../elementwise_math.h's smoothed_cross_entropy(_grad), shared with the other backends. Targets are
// checked by check_indices (checks.cu), whose result the host reads at its next copy from the device; until then a
// bad target's row has a NaN loss.
//
// Mapping: one warp per row (row_grid/row_block). Forward: the lanes find the row's max, then
// sum exp(x - max) and sum x, each combined with warp_reduce; lane 0 writes the row's loss and log-sum-exp.
// Backward: each lane writes its columns of g * (exp(x - lse) - smoothed target), lse from the forward.
// Sums run in double, as the CPU's: a loss is a small number made of large ones.
#include "cuda_backend.h"
#include "device_utils.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

template <class T>
__device__ double warp_log_sum_exp(const T* x, std::int64_t C) {
  T mx = x[0];
  for (std::int64_t c = threadIdx.x; c < C; c += kWarp) mx = Max{}(mx, x[c]);
  mx = warp_reduce(mx, Max{});
  double s = 0;
  for (std::int64_t c = threadIdx.x; c < C; c += kWarp) s += exp_(static_cast<double>(x[c] - mx));
  return static_cast<double>(mx) + log_(warp_reduce(s, Sum{}));
}

template <class T>
__global__ void cross_entropy_forward_kernel(T* loss, T* lse_out, const T* logits, const std::int64_t* targets,
                                             std::int64_t rows, std::int64_t C, std::int64_t ignore_index,
                                             double smoothing) {
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    const T* x = logits + r * C;
    const std::int64_t t = targets[r];
    const double lse = warp_log_sum_exp(x, C);
    if (threadIdx.x == 0) lse_out[r] = static_cast<T>(lse);
    if (t == ignore_index || t < 0 || t >= C) {  // the whole warp takes this branch: t is the same for all its lanes
      if (threadIdx.x == 0) loss[r] = t == ignore_index ? T(0) : static_cast<T>(log_(-1.0));  // NaN: reported later
      continue;
    }
    double sum_x = 0;
    for (std::int64_t c = threadIdx.x; c < C; c += kWarp) sum_x += x[c];
    sum_x = warp_reduce(sum_x, Sum{});
    if (threadIdx.x == 0)
      loss[r] = static_cast<T>(
          smoothed_cross_entropy(false, static_cast<double>(x[t]), sum_x, lse, static_cast<double>(C), smoothing));
  }
}

template <class T>
__global__ void cross_entropy_backward_kernel(T* dlogits, const T* logits, const T* lse_in, const std::int64_t* targets,
                                              const T* grad_loss, std::int64_t grad_stride, std::int64_t rows,
                                              std::int64_t C, std::int64_t ignore_index, double smoothing) {
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    const T* x = logits + r * C;
    T* d = dlogits + r * C;
    const std::int64_t t = targets[r];
    const T lse = lse_in[r], g = grad_loss[r * grad_stride];
    for (std::int64_t c = threadIdx.x; c < C; c += kWarp)
      d[c] = smoothed_cross_entropy_grad(t == ignore_index, exp_(x[c] - lse), g, smoothing, static_cast<double>(C)) -
             (c == t ? smoothed_cross_entropy_target_grad(t == ignore_index, g, smoothing) : T(0));
  }
}

}  // namespace

std::int64_t CudaBackend::cross_entropy_forward(const TensorDesc& loss, const TensorDesc& lse, const TensorDesc& logits,
                                                const TensorDesc& targets, std::int64_t ignore_index, double smoothing,
                                                const DescribeBadIndex& describe) {
  const std::int64_t n = logits.shape[0], C = logits.shape[1];
  if (n == 0) return -1;
  const auto* tgt = static_cast<const std::int64_t*>(targets.data);
  check_indices(tgt, n, C, true, ignore_index, describe);
  dispatch_floating(logits.dtype, "cross_entropy", [&](auto t) {
    using T = decltype(t);
    launch(cross_entropy_forward_kernel<T>, row_grid(n), row_block(), 0, static_cast<T*>(loss.data),
           static_cast<T*>(lse.data), static_cast<const T*>(logits.data), tgt, n, C, ignore_index, smoothing);
  });
  return -1;
}

void CudaBackend::cross_entropy_backward(const TensorDesc& dlogits, const TensorDesc& logits, const TensorDesc& lse,
                                         const TensorDesc& targets, const TensorDesc& grad_loss,
                                         std::int64_t ignore_index, double smoothing) {
  const std::int64_t n = logits.shape[0], C = logits.shape[1];
  if (n == 0) return;
  dispatch_floating(logits.dtype, "cross_entropy_backward", [&](auto t) {
    using T = decltype(t);
    launch(cross_entropy_backward_kernel<T>, row_grid(n), row_block(), 0, static_cast<T*>(dlogits.data),
           static_cast<const T*>(logits.data), static_cast<const T*>(lse.data),
           static_cast<const std::int64_t*>(targets.data), static_cast<const T*>(grad_loss.data),
           grad_loss.ndim ? grad_loss.strides[0] : std::int64_t{0}, n, C, ignore_index, smoothing);
  });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
