// Elementwise kernels over strided operands (a stride of 0 is a broadcast).
//
// Mapping: one CUDA thread per output element, 256 threads per block, a grid-stride loop
//   for (i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
// so that any n fits a capped grid. Thread i turns its flat position in the output's shape into a
// memory offset in each operand (offset_of: divide by each size, multiply by each stride). No shared
// memory: each element is read once. Neighbouring threads touch neighbouring elements when the
// operands are contiguous, so a warp's loads coalesce. The formulas are shared with the other backends
// (../elementwise_math.h: UnaryFn, BinaryFn); what is CUDA's own here is the thread mapping.
#include "../elementwise_math.h"
#include "cuda_backend.h"
#include "device_utils.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

constexpr unsigned kThreads = 256;
#if defined(__CUDACC__)
constexpr const char* kDeviceName = "cuda";
#else
constexpr const char* kDeviceName = "cuda-sim";
#endif

template <class TO, class TI, class F>
__global__ void map1_kernel(TensorDesc out, TensorDesc in, F f, std::int64_t n) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads())
    at<TO>(out)[offset_of(out, out, i)] = f(at<TI>(in)[offset_of(out, in, i)]);
}

template <class TO, class T, class F>
__global__ void map2_kernel(TensorDesc out, TensorDesc a, TensorDesc b, F f, std::int64_t n) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads())
    at<TO>(out)[offset_of(out, out, i)] = f(at<T>(a)[offset_of(out, a, i)], at<T>(b)[offset_of(out, b, i)]);
}

template <class T>
__global__ void where_kernel(TensorDesc out, TensorDesc cond, TensorDesc a, TensorDesc b, std::int64_t n) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads())
    at<T>(out)[offset_of(out, out, i)] =
        at<bool>(cond)[offset_of(out, cond, i)] ? at<T>(a)[offset_of(out, a, i)] : at<T>(b)[offset_of(out, b, i)];
}

template <class T>
__global__ void fill_kernel(TensorDesc out, T value, std::int64_t n) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) at<T>(out)[offset_of(out, out, i)] = value;
}

template <class T>
__global__ void accumulate_kernel(TensorDesc out, TensorDesc in, T alpha, std::int64_t n) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads())
    at<T>(out)[offset_of(out, out, i)] += alpha * at<T>(in)[offset_of(out, in, i)];
}

template <class TO, class TI, class F>
void map1(const TensorDesc& out, const TensorDesc& in, F f) {
  const std::int64_t n = out.numel();
  if (n) launch(map1_kernel<TO, TI, F>, blocks_for(n, kThreads), kThreads, 0, out, in, f, n);
}
template <class TO, class T, class F>
void map2(const TensorDesc& out, const TensorDesc& a, const TensorDesc& b, F f) {
  const std::int64_t n = out.numel();
  if (n) launch(map2_kernel<TO, T, F>, blocks_for(n, kThreads), kThreads, 0, out, a, b, f, n);
}

}  // namespace

void CudaBackend::fill(const TensorDesc& out, double value) {
  const std::int64_t n = out.numel();
  if (n == 0) return;
  dispatch_storage(out.dtype, [&](auto t) {
    using T = decltype(t);
    launch(fill_kernel<T>, blocks_for(n, kThreads), kThreads, 0, out, static_cast<T>(value), n);
  });
}

void CudaBackend::unary(UnaryOp op, const TensorDesc& out, const TensorDesc& in, double alpha) {
  if (op == UnaryOp::copy && transpose_copy(out, in)) return;  // both sides coalesced through shared memory
  dispatch_unary(op, out.dtype, in.dtype, alpha, kDeviceName,
                 [&](auto f, auto to, auto from) { map1<decltype(to), decltype(from)>(out, in, f); });
}

void CudaBackend::binary(BinaryOp op, const TensorDesc& out, const TensorDesc& a, const TensorDesc& b) {
  dispatch_binary(op, a.dtype, kDeviceName,
                  [&](auto f, auto to, auto t) { map2<decltype(to), decltype(t)>(out, a, b, f); });
}

void CudaBackend::where(const TensorDesc& out, const TensorDesc& cond, const TensorDesc& a, const TensorDesc& b) {
  const std::int64_t n = out.numel();
  if (n == 0) return;
  dispatch_storage(out.dtype, [&](auto t) {
    using T = decltype(t);
    launch(where_kernel<T>, blocks_for(n, kThreads), kThreads, 0, out, cond, a, b, n);
  });
}

void CudaBackend::accumulate(const TensorDesc& out, const TensorDesc& in, double alpha) {
  const std::int64_t n = out.numel();
  dispatch_all(out.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool>) {
      throw DTypeError("cuda backend: cannot accumulate into a bool tensor");
    } else if (n) {
      launch(accumulate_kernel<T>, blocks_for(n, kThreads), kThreads, 0, out, in, static_cast<T>(alpha), n);
    }
  });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
