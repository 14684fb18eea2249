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
// - Few outputs with many inputs each (a gradient's sum of squares for clip_grad_norm_: one output, a
//   parameter's every element) would leave all but a few multiprocessors idle, one block walking the whole
//   tensor. Then each output's reduced positions are cut into `splits` consecutive pieces of at least
//   kPieceCount, one block each (the same kernel, the block's range narrowed), which write their partials in
//   the accumulator's type; the serial kernel then adds each output's partials in order. The pieces follow
//   from the shape alone, so the result is the same on every run.
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
  std::int64_t splits = 1, piece = 0;   // blocks per output and the reduced positions each takes (split path)
};

// Block b takes piece b % splits of output b / splits: with one split, the output's every input, written to out;
// with more, a range of them, its partial written to partials[b].
template <class T, class Acc, class Op>
__global__ void reduce_kernel(T* out, Acc* partials, const T* in, Geometry g, Op op, Acc identity) {
  for (std::int64_t b = blockIdx.x; b < g.outputs * g.splits; b += gridDim.x) {
    const std::int64_t j = b / g.splits, begin = b % g.splits * g.piece;
    const std::int64_t end = g.splits == 1 || begin + g.piece > g.count ? g.count : begin + g.piece;
    const T* base = in + unravel(j, g.kept_ndim, g.kept_shape, g.kept_in_stride);
    Acc acc = identity;
    // EXERCISE 9.3 (continued)
    for (std::int64_t r = begin + threadIdx.x; r < end; r += blockDim.x)
      acc = op(acc, static_cast<Acc>(base[unravel(r, g.reduced_ndim, g.reduced_shape, g.reduced_stride)]));
    // END EXERCISE
    acc = block_reduce(acc, op, identity);
    if (threadIdx.x == 0) {
      if (g.splits == 1)
        out[unravel(j, g.kept_ndim, g.kept_shape, g.kept_out_stride)] = static_cast<T>(acc);
      else
        partials[b] = acc;
    }
  }
}

template <class T, class In, class Acc, class Op>
__global__ void reduce_serial_kernel(T* out, const In* in, Geometry g, Op op, Acc identity) {
  for (std::int64_t j = global_thread(); j < g.outputs; j += grid_threads()) {
    const In* base = in + unravel(j, g.kept_ndim, g.kept_shape, g.kept_in_stride);
    Acc acc = identity;
    for (std::int64_t r = 0; r < g.count; ++r)
      acc = op(acc, static_cast<Acc>(base[unravel(r, g.reduced_ndim, g.reduced_shape, g.reduced_stride)]));
    out[unravel(j, g.kept_ndim, g.kept_shape, g.kept_out_stride)] = static_cast<T>(acc);
  }
}

constexpr std::int64_t kSerialCount = 64;
// The split path: at most kMaxSplits pieces per output, each of at least kPieceCount inputs (16 per thread of a
// block of 256), taken when the outputs alone would fill fewer than kFewOutputs blocks.
constexpr std::int64_t kPieceCount = 4096, kMaxSplits = 128, kFewOutputs = 128;

// The partials' geometry: output j's `splits` partials lie contiguous at j * splits, and go where g puts output j.
Geometry partials_geometry(const Geometry& g) {
  Geometry p = g;
  std::int64_t stride = g.splits;
  for (int d = g.kept_ndim - 1; d >= 0; stride *= g.kept_shape[d--]) p.kept_in_stride[d] = stride;
  p.reduced_ndim = 1;
  p.reduced_shape[0] = p.count = g.splits;
  p.reduced_stride[0] = 1;
  p.splits = 1;
  return p;
}

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
  const unsigned threads =
      static_cast<unsigned>(std::clamp<std::int64_t>((g.count + kWarp - 1) / kWarp * kWarp, kWarp, 256));
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
      const unsigned serial_blocks = blocks_for(g.outputs, 128);
      if (g.count <= kSerialCount) {
        if (op == ReduceOp::sum)
          launch(reduce_serial_kernel<T, T, Acc, Sum>, serial_blocks, 128u, 0, o, x, g, Sum{}, Acc(0));
        else
          launch(reduce_serial_kernel<T, T, Acc, Max>, serial_blocks, 128u, 0, o, x, g, Max{}, lowest);
        return;
      }
      g.splits = g.outputs < kFewOutputs ? std::min(kMaxSplits, g.count / kPieceCount) : 1;
      if (g.splits <= 1) {
        g.splits = 1;
        if (op == ReduceOp::sum)
          launch(reduce_kernel<T, Acc, Sum>, blocks, threads, 0, o, nullptr, x, g, Sum{}, Acc(0));
        else
          launch(reduce_kernel<T, Acc, Max>, blocks, threads, 0, o, nullptr, x, g, Max{}, lowest);
        return;
      }
      g.piece = (g.count + g.splits - 1) / g.splits;
      const std::size_t bytes = static_cast<std::size_t>(g.outputs * g.splits) * sizeof(Acc);
      Acc* partials = static_cast<Acc*>(allocate(bytes));
      const auto pieces = static_cast<unsigned>(g.outputs * g.splits);
      if (op == ReduceOp::sum) {
        launch(reduce_kernel<T, Acc, Sum>, pieces, threads, 0, o, partials, x, g, Sum{}, Acc(0));
        launch(reduce_serial_kernel<T, Acc, Acc, Sum>, serial_blocks, 128u, 0, o, partials, partials_geometry(g), Sum{},
               Acc(0));
      } else {
        launch(reduce_kernel<T, Acc, Max>, pieces, threads, 0, o, partials, x, g, Max{}, lowest);
        launch(reduce_serial_kernel<T, Acc, Acc, Max>, serial_blocks, 128u, 0, o, partials, partials_geometry(g), Max{},
               lowest);
      }
      deallocate(partials, bytes);  // the cache hands it out only to work queued after ours
    }
  });
}

// clip_grad_norm_'s sums of squares, 16 tensors a launch (their addresses in the arguments, as adam_update_many's):
// each block squares and adds one chunk of 4,096 elements of one tensor in float64, then one warp per tensor adds
// its chunks' partial sums in chunk order. The chunks are fixed by the sizes, so the sums are the same on every run.
namespace {
constexpr int kSquaresGroup = 16;
constexpr std::int64_t kSquaresChunk = 4096;
template <class T>
struct SquaresGroup {
  const T* x[kSquaresGroup];
  std::int64_t n[kSquaresGroup];
  std::int64_t first_chunk[kSquaresGroup + 1];  // tensor t owns chunks [first_chunk[t], first_chunk[t + 1])
  int count;
};

template <class T>
__global__ void squares_chunk_kernel(SquaresGroup<T> g, double* partials) {
  const auto chunk = static_cast<std::int64_t>(blockIdx.x);
  int t = 0;
  while (g.first_chunk[t + 1] <= chunk) ++t;
  const std::int64_t begin = (chunk - g.first_chunk[t]) * kSquaresChunk;
  const std::int64_t end = begin + kSquaresChunk < g.n[t] ? begin + kSquaresChunk : g.n[t];
  double s = 0;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double v = static_cast<double>(g.x[t][i]);
    s += v * v;
  }
  s = block_reduce(s, Sum{}, 0.0);
  if (threadIdx.x == 0) partials[chunk] = s;
}

template <class T>
__global__ void squares_total_kernel(SquaresGroup<T> g, const double* partials, double* out) {
  const int t = static_cast<int>(blockIdx.x);
  double s = 0;
  for (std::int64_t c = g.first_chunk[t] + threadIdx.x; c < g.first_chunk[t + 1]; c += kWarp) s += partials[c];
  s = warp_reduce(s, Sum{});
  if (threadIdx.x == 0) out[t] = s;
}
}  // namespace

bool CudaBackend::sum_squares_many(const TensorDesc& out, const std::vector<TensorDesc>& tensors) {
  if (tensors.empty()) return true;
  dispatch_operands(tensors[0].dtype, "sum_squares_many", [&](auto z) {
    using T = decltype(z);
    for (std::size_t first = 0; first < tensors.size(); first += kSquaresGroup) {
      SquaresGroup<T> g{};
      g.count = static_cast<int>(std::min<std::size_t>(kSquaresGroup, tensors.size() - first));
      for (int t = 0; t < g.count; ++t) {
        const TensorDesc& d = tensors[first + static_cast<std::size_t>(t)];
        g.x[t] = static_cast<const T*>(d.data);
        g.n[t] = d.numel();
        g.first_chunk[t + 1] = g.first_chunk[t] + (g.n[t] + kSquaresChunk - 1) / kSquaresChunk;
      }
      const std::int64_t chunks = g.first_chunk[g.count];
      const std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(chunks, 1)) * sizeof(double);
      auto* partials = static_cast<double*>(allocate(bytes));
      if (chunks > 0) launch(squares_chunk_kernel<T>, static_cast<unsigned>(chunks), 256u, 0, g, partials);
      launch(squares_total_kernel<T>, static_cast<unsigned>(g.count), static_cast<unsigned>(kWarp), 0, g,
             static_cast<const double*>(partials), static_cast<double*>(out.data) + first);
      deallocate(partials, bytes);  // the cache hands it out only to work queued after ours
    }
  });
  return true;
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
