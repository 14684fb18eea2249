// Row softmax and log-softmax over contiguous rows of C elements, max-subtracted for stability.
//
// Mapping: one warp per row (row_grid/row_block: blocks of 32 x 4 threads, four rows per block).
// Lane l reads elements l, l + 32, l + 64, ... of its row, so each step of the warp reads 32
// consecutive floats: one coalesced load. Three passes over the row: the maximum (warp_reduce with
// Max), the sum of exp(x - max) (warp_reduce with Sum), then the outputs. No shared memory: the
// shuffles move partial results between the lanes' registers. The sum accumulates in T (a GPU's
// choice; the CPU backend sums in double), so float32 results agree with the CPU within rounding.
#include "cuda_backend.h"
#include "device_utils.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

template <class T>
__global__ void softmax_forward_kernel(T* out, const T* in, std::int64_t rows, std::int64_t C, bool log) {
  const int lane = threadIdx.x;
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    // EXERCISE 9.1: one warp per row: the row's max and sum of exp(x - max) by warp_reduce, then y.
    const T* x = in + r * C;
    T* y = out + r * C;
    T mx = x[0];
    for (std::int64_t c = lane; c < C; c += kWarp) mx = Max{}(mx, x[c]);
    mx = warp_reduce(mx, Max{});
    T total = 0;
    for (std::int64_t c = lane; c < C; c += kWarp) total += exp_(x[c] - mx);
    total = warp_reduce(total, Sum{});
    if (log) {
      const T lse = log_(total);
      for (std::int64_t c = lane; c < C; c += kWarp) y[c] = x[c] - mx - lse;
    } else {
      const T inv = T(1) / total;
      for (std::int64_t c = lane; c < C; c += kWarp) y[c] = exp_(x[c] - mx) * inv;
    }
    // END EXERCISE
  }
}

// softmax: gi = y * (g - sum(g * y)); log_softmax: gi = g - exp(y) * sum(g). One warp per row again.
template <class T>
__global__ void softmax_backward_kernel(T* grad_in, const T* grad_out, const T* out, std::int64_t rows, std::int64_t C,
                                        bool log) {
  const int lane = threadIdx.x;
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    const T* g = grad_out + r * C;
    const T* y = out + r * C;
    T* gi = grad_in + r * C;
    T dot = 0;
    for (std::int64_t c = lane; c < C; c += kWarp) dot += log ? g[c] : g[c] * y[c];
    dot = warp_reduce(dot, Sum{});
    for (std::int64_t c = lane; c < C; c += kWarp) gi[c] = log ? g[c] - exp_(y[c]) * dot : y[c] * (g[c] - dot);
  }
}

}  // namespace

void CudaBackend::softmax_forward(const TensorDesc& out, const TensorDesc& in, bool log) {
  const std::int64_t C = in.ndim ? in.shape[in.ndim - 1] : 1;
  const std::int64_t rows = C ? in.numel() / C : 0;
  if (rows == 0) return;
  dispatch_floating(in.dtype, "softmax", [&](auto t) {
    using T = decltype(t);
    launch(softmax_forward_kernel<T>, row_grid(rows), row_block(), 0, static_cast<T*>(out.data),
           static_cast<const T*>(in.data), rows, C, log);
  });
}

void CudaBackend::softmax_backward(const TensorDesc& grad_in, const TensorDesc& grad_out, const TensorDesc& out,
                                   bool log) {
  const std::int64_t C = out.ndim ? out.shape[out.ndim - 1] : 1;
  const std::int64_t rows = C ? out.numel() / C : 0;
  if (rows == 0) return;
  dispatch_floating(out.dtype, "softmax_backward", [&](auto t) {
    using T = decltype(t);
    launch(softmax_backward_kernel<T>, row_grid(rows), row_block(), 0, static_cast<T*>(grad_in.data),
           static_cast<const T*>(grad_out.data), static_cast<const T*>(out.data), rows, C, log);
  });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
