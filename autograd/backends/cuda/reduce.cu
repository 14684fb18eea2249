// Reductions (sum, max) over any set of dimensions of a strided input.
//
// Two mappings, chosen by the shape alone (so a tensor and its transposed copy give identical results):
// - Few elements per output (at most kSerialCount): one thread per output element adds them one after
//   another. When the reduced dimensions lead (a bias gradient: sum over rows), neighbouring threads read
//   neighbouring columns, so the loads coalesce, and no barrier or shuffle is spent on a few additions.
// - Otherwise one block per output element (blockIdx.x, grid-stride over outputs). The block's threads
//   split that output's reduced sub-space: thread t takes reduced positions t, t + blockDim.x, ... and
//   keeps a private partial; then block_reduce combines them — a butterfly of __shfl_xor_sync within
//   each warp, the warps' results through 32 slots of shared memory, and warp 0 once more.
// Float sums accumulate in double, as the CPU backend does; the order of the additions differs from
// the CPU's, so results agree within rounding, not bit for bit.
#include <algorithm>
#include <limits>

#include "cuda_backend.h"
#include "device_utils.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

// The input's dimensions split into kept ones (one output element per combination) and reduced ones.
struct Geometry {
  int kept_ndim = 0, reduced_ndim = 0;
  std::int64_t kept_shape[kMaxDims] = {}, kept_in_stride[kMaxDims] = {}, kept_out_stride[kMaxDims] = {};
  std::int64_t reduced_shape[kMaxDims] = {}, reduced_stride[kMaxDims] = {};
  std::int64_t outputs = 1, count = 1;  // output elements; input elements per output
};

template <class T, class Acc, class Op>
__global__ void reduce_kernel(T* out, const T* in, Geometry g, Op op, Acc identity) {
  for (std::int64_t j = blockIdx.x; j < g.outputs; j += gridDim.x) {
    const T* base = in + unravel(j, g.kept_ndim, g.kept_shape, g.kept_in_stride);
    Acc acc = identity;
    // EXERCISE 9.3 (continued)
    for (std::int64_t r = threadIdx.x; r < g.count; r += blockDim.x)
      acc = op(acc, static_cast<Acc>(base[unravel(r, g.reduced_ndim, g.reduced_shape, g.reduced_stride)]));
    // END EXERCISE
    acc = block_reduce(acc, op, identity);
    if (threadIdx.x == 0) out[unravel(j, g.kept_ndim, g.kept_shape, g.kept_out_stride)] = static_cast<T>(acc);
  }
}

template <class T, class Acc, class Op>
__global__ void reduce_serial_kernel(T* out, const T* in, Geometry g, Op op, Acc identity) {
  for (std::int64_t j = global_thread(); j < g.outputs; j += grid_threads()) {
    const T* base = in + unravel(j, g.kept_ndim, g.kept_shape, g.kept_in_stride);
    Acc acc = identity;
    for (std::int64_t r = 0; r < g.count; ++r)
      acc = op(acc, static_cast<Acc>(base[unravel(r, g.reduced_ndim, g.reduced_shape, g.reduced_stride)]));
    out[unravel(j, g.kept_ndim, g.kept_shape, g.kept_out_stride)] = static_cast<T>(acc);
  }
}

constexpr std::int64_t kSerialCount = 64;

}  // namespace

void CudaBackend::reduce(ReduceOp op, const TensorDesc& out, const TensorDesc& in) {
  Geometry g;
  for (int d = 0; d < in.ndim; ++d) {
    if (out.shape[d] == 1 && in.shape[d] != 1) {
      g.reduced_shape[g.reduced_ndim] = in.shape[d];
      g.reduced_stride[g.reduced_ndim++] = in.strides[d];
      g.count *= in.shape[d];
    } else {
      g.kept_shape[g.kept_ndim] = in.shape[d];
      g.kept_in_stride[g.kept_ndim] = in.strides[d];
      g.kept_out_stride[g.kept_ndim++] = out.strides[d];
      g.outputs *= in.shape[d];
    }
  }
  if (g.outputs == 0) return;
  // Enough warps for the work, at most 8: a reduction of 10 elements should not start 256 threads.
  const unsigned threads = static_cast<unsigned>(std::min<std::int64_t>(256, (g.count + kWarp - 1) / kWarp * kWarp));
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(g.outputs, 65535));
  dispatch_all(in.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool>) {
      throw DTypeError("cuda backend: cannot reduce a bool tensor");
    } else {
      using Acc = std::conditional_t<std::is_floating_point_v<T>, double, long long>;
      T* o = static_cast<T*>(out.data);
      const T* x = static_cast<const T*>(in.data);
      const auto lowest = static_cast<Acc>(std::numeric_limits<T>::lowest());
      if (g.count <= kSerialCount) {
        const unsigned serial_blocks = blocks_for(g.outputs, 128);
        if (op == ReduceOp::sum)
          launch(reduce_serial_kernel<T, Acc, Sum>, serial_blocks, 128u, 0, o, x, g, Sum{}, Acc(0));
        else
          launch(reduce_serial_kernel<T, Acc, Max>, serial_blocks, 128u, 0, o, x, g, Max{}, lowest);
      } else if (op == ReduceOp::sum) {
        launch(reduce_kernel<T, Acc, Sum>, blocks, std::max(threads, 32u), 0, o, x, g, Sum{}, Acc(0));
      } else {
        launch(reduce_kernel<T, Acc, Max>, blocks, std::max(threads, 32u), 0, o, x, g, Max{}, lowest);
      }
    }
  });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
