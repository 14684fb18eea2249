// rotate_pairs: one thread per coordinate pair (grid-stride). Thread k takes pair p = k mod D/2 of row
// r = k / (D/2): x's row is found through its strides (unravel; a permuted view of the heads needs no copy first),
// y is contiguous, and the pair is turned by ../elementwise_math.h's rotate_pair. With `half` pairing a warp
// reads 32 consecutive coordinates of each half of a row (coalesced); `adjacent` pairs read two neighbours.
#include "../elementwise_math.h"
#include "cuda_backend.h"
#include "device_utils.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

constexpr unsigned kThreads = 256;

template <class T>
__global__ void rotate_pairs_kernel(T* y, TensorDesc x, const T* cos, const T* sin, std::int64_t rows,
                                    std::int64_t T_len, std::int64_t pairs, bool half, T sign) {
  const std::int64_t n = rows * pairs;
  for (std::int64_t k = global_thread(); k < n; k += grid_threads()) {
    const std::int64_t r = k / pairs, p = k % pairs, position = r % T_len;
    const T* xr = static_cast<const T*>(x.data) + unravel(r, x.ndim - 1, x.shape, x.strides);
    T* yr = y + r * 2 * pairs;
    const std::int64_t first = half ? p : 2 * p, second = half ? p + pairs : 2 * p + 1;
    rotate_pair(xr[first], xr[second], cos[position * pairs + p], sign * sin[position * pairs + p], yr[first],
                yr[second]);
  }
}

}  // namespace

void CudaBackend::rotate_pairs(const TensorDesc& y, const TensorDesc& x, const TensorDesc& cos, const TensorDesc& sin,
                               RopePairing pairing, bool inverse) {
  const std::int64_t D = x.shape[x.ndim - 1], T_len = x.shape[x.ndim - 2], pairs = D / 2;
  const std::int64_t rows = D ? x.numel() / D : 0;
  if (rows == 0 || pairs == 0) return;
  dispatch_floating(x.dtype, "rotate_pairs", [&](auto t) {
    using T = decltype(t);
    launch(rotate_pairs_kernel<T>, blocks_for(rows * pairs, kThreads), kThreads, 0, static_cast<T*>(y.data), x,
           static_cast<const T*>(cos.data), static_cast<const T*>(sin.data), rows, T_len, pairs,
           pairing == RopePairing::half, inverse ? T(-1) : T(1));
  });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
