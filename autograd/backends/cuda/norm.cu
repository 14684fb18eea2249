// LayerNorm over contiguous rows of D (Ba et al. 2016; the formulas are in backends/cpu/norm.cpp).
//
// forward, backward dx — one warp per row (row_grid/row_block): lanes stride along the row, partial
//   sums meet through warp_reduce (__shfl_xor_sync). The mean is found first and the variance from
//   (x - mean)^2 in a second pass (two passes: the one-pass E[x^2] - E[x]^2 cancels badly in float).
// dgamma, dbeta — sums over rows, one thread per column: thread i walks the rows of column i, so a warp
//   reads 32 consecutive elements of one row at each step (coalesced). D threads alone would leave most of
//   a GPU idle (D = 256: two blocks walking 2,048 rows each), so the rows are cut into slices, a row of
//   blocks each (blockIdx.y), whose sums go to partials[slice][column]; the backend's own reduce then adds
//   each column's slices in order (reduce.cu). The slices follow from the shape alone and nothing is
//   atomic: the same result on every run.
// RMSNorm: the same mapping, one pass for the sum of squares (no mean to subtract), and rstd and dx from
// ../elementwise_math.h's rms_norm_rstd and rms_norm_dx, the formulas every backend shares.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "cuda_backend.h"
#include "device_utils.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

template <class T>
__global__ void layer_norm_forward_kernel(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta,
                                          std::int64_t rows, std::int64_t D, T eps) {
  const int lane = threadIdx.x;
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    T sum = 0;
    for (std::int64_t i = lane; i < D; i += kWarp) sum += xr[i];
    const T mu = warp_reduce(sum, Sum{}) / static_cast<T>(D);
    T sq = 0;
    for (std::int64_t i = lane; i < D; i += kWarp) sq += (xr[i] - mu) * (xr[i] - mu);
    const T rs = T(1) / sqrt_(warp_reduce(sq, Sum{}) / static_cast<T>(D) + eps);
    for (std::int64_t i = lane; i < D; i += kWarp)
      yr[i] = (xr[i] - mu) * rs * (gamma ? gamma[i] : T(1)) + (beta ? beta[i] : T(0));
    if (lane == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
  }
}

template <class T>
__global__ void layer_norm_backward_kernel(T* dx, const T* dy, const T* x, const T* mean, const T* rstd, const T* gamma,
                                           std::int64_t rows, std::int64_t D) {
  const int lane = threadIdx.x;
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    const T* xr = x + r * D;
    const T* dyr = dy + r * D;
    const T mu = mean[r], rs = rstd[r];
    T sum_gx = 0, sum_gx_xhat = 0;
    for (std::int64_t i = lane; i < D; i += kWarp) {
      const T gx = gamma ? dyr[i] * gamma[i] : dyr[i];
      sum_gx += gx;
      sum_gx_xhat += gx * (xr[i] - mu) * rs;
    }
    const T a = warp_reduce(sum_gx, Sum{}) / static_cast<T>(D);
    const T c = warp_reduce(sum_gx_xhat, Sum{}) / static_cast<T>(D);
    for (std::int64_t i = lane; i < D; i += kWarp) {
      const T gx = gamma ? dyr[i] * gamma[i] : dyr[i];
      dx[r * D + i] = rs * (gx - a - (xr[i] - mu) * rs * c);
    }
  }
}

// Rows [blockIdx.y * slice, + slice) of each column; the sums go to row blockIdx.y of dgamma and dbeta (partials
// when there are several slices).
struct RowSlice {
  std::int64_t begin, end;
};
__device__ inline RowSlice row_slice(std::int64_t rows, std::int64_t slice) {
  const std::int64_t begin = blockIdx.y * slice;
  return {begin, begin + slice < rows ? begin + slice : rows};
}

template <class T>
__global__ void layer_norm_param_grads_kernel(T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean,
                                              const T* rstd, std::int64_t rows, std::int64_t D, std::int64_t slice) {
  const RowSlice s = row_slice(rows, slice);
  for (std::int64_t i = global_thread(); i < D; i += grid_threads()) {
    T dg = 0, db = 0;
    for (std::int64_t r = s.begin; r < s.end; ++r) {
      dg += dy[r * D + i] * (x[r * D + i] - mean[r]) * rstd[r];
      db += dy[r * D + i];
    }
    if (dgamma) dgamma[blockIdx.y * D + i] = dg;
    if (dbeta) dbeta[blockIdx.y * D + i] = db;
  }
}

// With a residual, each lane first writes its own entries of sum = x + residual and then reads them back: the same
// lane, the same entries, so the row needs no barrier between.
template <class T>
__global__ void rms_norm_forward_kernel(T* y, T* rstd, T* sum, const T* x, const T* residual, const T* gamma,
                                        std::int64_t rows, std::int64_t D, T eps) {
  const int lane = threadIdx.x;
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    const T* xr = x + r * D;
    if (residual) {
      T* sr = sum + r * D;
      for (std::int64_t i = lane; i < D; i += kWarp) sr[i] = xr[i] + residual[r * D + i];
      xr = sr;
    }
    T* yr = y + r * D;
    T sq = 0;
    for (std::int64_t i = lane; i < D; i += kWarp) sq += xr[i] * xr[i];
    const T rs = rms_norm_rstd(warp_reduce(sq, Sum{}), D, eps);
    for (std::int64_t i = lane; i < D; i += kWarp) yr[i] = xr[i] * rs * (gamma ? gamma[i] : T(1));
    if (lane == 0) rstd[r] = rs;
  }
}

template <class T>
__global__ void rms_norm_backward_kernel(T* dx, const T* dy, const T* x, const T* rstd, const T* gamma,
                                         std::int64_t rows, std::int64_t D) {
  const int lane = threadIdx.x;
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    const T* xr = x + r * D;
    const T* dyr = dy + r * D;
    const T rs = rstd[r];
    T sum_gx_xhat = 0;
    for (std::int64_t i = lane; i < D; i += kWarp) sum_gx_xhat += (gamma ? dyr[i] * gamma[i] : dyr[i]) * xr[i] * rs;
    const T c = warp_reduce(sum_gx_xhat, Sum{}) / static_cast<T>(D);
    for (std::int64_t i = lane; i < D; i += kWarp)
      dx[r * D + i] = rms_norm_dx(gamma ? dyr[i] * gamma[i] : dyr[i], xr[i] * rs, rs, c);
  }
}

template <class T>
__global__ void rms_norm_gain_grad_kernel(T* dgamma, const T* dy, const T* x, const T* rstd, std::int64_t rows,
                                          std::int64_t D, std::int64_t slice) {
  const RowSlice s = row_slice(rows, slice);
  for (std::int64_t i = global_thread(); i < D; i += grid_threads()) {
    T dg = 0;
    for (std::int64_t r = s.begin; r < s.end; ++r) dg += dy[r * D + i] * (x[r * D + i] * rstd[r]);
    dgamma[blockIdx.y * D + i] = dg;
  }
}

// The slices of a column sum over rows (the header): grid() launches D threads per slice; into(result) is where
// the slices' kernel writes that result's sums (the result itself for one slice, else partials); finish() sums
// each column's partials into its result with reduce.
template <class T>
class RowSlices {
 public:
  RowSlices(Backend& backend, std::int64_t rows, std::int64_t D) : backend_(backend), D_(D) {
    constexpr std::int64_t kSliceRows = 64, kMaxSlices = 256;
    slices_ = std::min(kMaxSlices, std::max<std::int64_t>(1, (rows + kSliceRows - 1) / kSliceRows));
    rows_each_ = (rows + slices_ - 1) / slices_;
  }
  dim3 grid() const { return dim3(blocks_for(D_, 128), static_cast<unsigned>(slices_)); }
  std::int64_t rows_each() const { return rows_each_; }
  T* into(T* result) {
    if (!result || slices_ == 1) return result;
    T* partials = static_cast<T*>(backend_.allocate(bytes()));
    pending_.push_back({result, partials});
    return partials;
  }
  void finish() {
    for (const auto& [result, partials] : pending_) {
      const DType dtype = std::is_same_v<T, double> ? DType::float64 : DType::float32;
      const TensorDesc sums{result, dtype, 2, {1, D_}, {D_, 1}}, slices{partials, dtype, 2, {slices_, D_}, {D_, 1}};
      backend_.reduce(ReduceOp::sum, sums, slices);
      backend_.deallocate(partials, bytes());  // the cache hands it out only to work queued after ours
    }
    pending_.clear();
  }

 private:
  std::size_t bytes() const { return static_cast<std::size_t>(slices_ * D_) * sizeof(T); }
  Backend& backend_;
  std::int64_t D_, slices_ = 1, rows_each_ = 0;
  std::vector<std::pair<T*, T*>> pending_;
};

}  // namespace

void CudaBackend::layer_norm_forward(const TensorDesc& y, const TensorDesc& mean, const TensorDesc& rstd,
                                     const TensorDesc& x, const TensorDesc& gamma, const TensorDesc& beta, double eps) {
  const std::int64_t D = x.shape[x.ndim - 1];
  const std::int64_t rows = D ? x.numel() / D : 0;
  if (rows == 0) return;
  dispatch_floating(x.dtype, "layer_norm", [&](auto t) {
    using T = decltype(t);
    launch(layer_norm_forward_kernel<T>, row_grid(rows), row_block(), 0, static_cast<T*>(y.data),
           static_cast<T*>(mean.data), static_cast<T*>(rstd.data), static_cast<const T*>(x.data),
           static_cast<const T*>(gamma.data), static_cast<const T*>(beta.data), rows, D, static_cast<T>(eps));
  });
}

void CudaBackend::layer_norm_backward(const TensorDesc& dx, const TensorDesc& dgamma, const TensorDesc& dbeta,
                                      const TensorDesc& dy, const TensorDesc& x, const TensorDesc& mean,
                                      const TensorDesc& rstd, const TensorDesc& gamma) {
  const std::int64_t D = x.shape[x.ndim - 1];
  const std::int64_t rows = D ? x.numel() / D : 0;
  if (D == 0) return;
  dispatch_floating(x.dtype, "layer_norm_backward", [&](auto t) {
    using T = decltype(t);
    const T* xs = static_cast<const T*>(x.data);
    const T* dys = static_cast<const T*>(dy.data);
    const T* m = static_cast<const T*>(mean.data);
    const T* rs = static_cast<const T*>(rstd.data);
    if (rows)
      launch(layer_norm_backward_kernel<T>, row_grid(rows), row_block(), 0, static_cast<T*>(dx.data), dys, xs, m, rs,
             static_cast<const T*>(gamma.data), rows, D);
    if (dgamma.data || dbeta.data) {
      RowSlices<T> slices(*this, rows, D);
      launch(layer_norm_param_grads_kernel<T>, slices.grid(), 128, 0, slices.into(static_cast<T*>(dgamma.data)),
             slices.into(static_cast<T*>(dbeta.data)), dys, xs, m, rs, rows, D, slices.rows_each());
      slices.finish();
    }
  });
}

void CudaBackend::rms_norm_forward(const TensorDesc& y, const TensorDesc& rstd, const TensorDesc& sum,
                                   const TensorDesc& x, const TensorDesc& residual, const TensorDesc& gamma,
                                   double eps) {
  const std::int64_t D = x.shape[x.ndim - 1];
  const std::int64_t rows = D ? x.numel() / D : 0;
  if (rows == 0) return;
  dispatch_floating(x.dtype, "rms_norm", [&](auto t) {
    using T = decltype(t);
    launch(rms_norm_forward_kernel<T>, row_grid(rows), row_block(), 0, static_cast<T*>(y.data),
           static_cast<T*>(rstd.data), static_cast<T*>(sum.data), static_cast<const T*>(x.data),
           static_cast<const T*>(residual.data), static_cast<const T*>(gamma.data), rows, D, static_cast<T>(eps));
  });
}

void CudaBackend::rms_norm_backward(const TensorDesc& dx, const TensorDesc& dgamma, const TensorDesc& dy,
                                    const TensorDesc& x, const TensorDesc& rstd, const TensorDesc& gamma) {
  const std::int64_t D = x.shape[x.ndim - 1];
  const std::int64_t rows = D ? x.numel() / D : 0;
  if (D == 0) return;
  dispatch_floating(x.dtype, "rms_norm_backward", [&](auto t) {
    using T = decltype(t);
    const T* xs = static_cast<const T*>(x.data);
    const T* dys = static_cast<const T*>(dy.data);
    const T* rs = static_cast<const T*>(rstd.data);
    if (rows)
      launch(rms_norm_backward_kernel<T>, row_grid(rows), row_block(), 0, static_cast<T*>(dx.data), dys, xs, rs,
             static_cast<const T*>(gamma.data), rows, D);
    if (dgamma.data) {
      RowSlices<T> slices(*this, rows, D);
      launch(rms_norm_gain_grad_kernel<T>, slices.grid(), 128, 0, slices.into(static_cast<T*>(dgamma.data)), dys, xs,
             rs, rows, D, slices.rows_each());
      slices.finish();
    }
  });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
