// Elementwise kernels over strided operands (a stride of 0 is a broadcast).
//
// Mapping: one CUDA thread per output element, 256 threads per block, a grid-stride loop
//   for (i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
// so that any n fits a capped grid. Thread i turns its flat position in the output's shape into a
// memory offset in each operand (offset_of: divide by each size, multiply by each stride). No shared
// memory: each element is read once. Neighbouring threads touch neighbouring elements when the
// operands are contiguous, so a warp's loads coalesce.
#include "cuda_backend.h"
#include "device_utils.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

constexpr unsigned kThreads = 256;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

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

// The functions, as small structs: a kernel template takes one as a parameter.
template <class TO>
struct Convert {
  template <class T>
  __device__ TO operator()(T x) const {
    return static_cast<TO>(x);
  }
};
struct Not {
  __device__ bool operator()(bool x) const { return !x; }
};
struct Neg {
  template <class T>
  __device__ T operator()(T x) const {
    return -x;
  }
};
struct Exp {
  template <class T>
  __device__ T operator()(T x) const {
    return exp_(x);
  }
};
struct Log {
  template <class T>
  __device__ T operator()(T x) const {
    return log_(x);
  }
};
struct Sqrt {
  template <class T>
  __device__ T operator()(T x) const {
    return sqrt_(x);
  }
};
struct Rsqrt {
  template <class T>
  __device__ T operator()(T x) const {
    return T(1) / sqrt_(x);
  }
};
struct Tanh {
  template <class T>
  __device__ T operator()(T x) const {
    return tanh_(x);
  }
};
struct Relu {
  template <class T>
  __device__ T operator()(T x) const {
    return x > T(0) ? x : T(0);
  }
};
struct Gelu {  // exact (erf) form, as torch.nn.GELU()
  template <class T>
  __device__ T operator()(T x) const {
    return static_cast<T>(0.5 * x * (1.0 + erf_(static_cast<double>(x) * kInvSqrt2)));
  }
};
template <class T>
struct Pow {
  T p;
  __device__ T operator()(T x) const { return pow_(x, p); }
};
template <class T>
struct Scale {
  T a;
  __device__ T operator()(T x) const { return x * a; }
};

struct Add {
  template <class T>
  __device__ T operator()(T x, T y) const {
    return x + y;
  }
};
struct Sub {
  template <class T>
  __device__ T operator()(T x, T y) const {
    return x - y;
  }
};
struct Mul {
  template <class T>
  __device__ T operator()(T x, T y) const {
    return x * y;
  }
};
struct Div {
  template <class T>
  __device__ T operator()(T x, T y) const {
    return x / y;
  }
};
struct Eq {
  template <class T>
  __device__ bool operator()(T x, T y) const {
    return x == y;
  }
};
struct Ne {
  template <class T>
  __device__ bool operator()(T x, T y) const {
    return x != y;
  }
};
struct Lt {
  template <class T>
  __device__ bool operator()(T x, T y) const {
    return x < y;
  }
};
struct Gt {
  template <class T>
  __device__ bool operator()(T x, T y) const {
    return x > y;
  }
};
struct ReluBackward {
  template <class T>
  __device__ T operator()(T g, T x) const {
    return x > T(0) ? g : T(0);
  }
};
struct GeluBackward {  // d/dx x Phi(x) = Phi(x) + x phi(x)
  template <class T>
  __device__ T operator()(T g, T x) const {
    const double xd = x;
    return g * static_cast<T>(0.5 * (1.0 + erf_(xd * kInvSqrt2)) + xd * kInvSqrt2Pi * exp_(-0.5 * xd * xd));
  }
};
struct TanhBackward {
  template <class T>
  __device__ T operator()(T g, T y) const {
    return g * (T(1) - y * y);
  }
};

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
  dispatch_all(out.dtype, [&](auto t) {
    using T = decltype(t);
    launch(fill_kernel<T>, blocks_for(n, kThreads), kThreads, 0, out, static_cast<T>(value), n);
  });
}

void CudaBackend::unary(UnaryOp op, const TensorDesc& out, const TensorDesc& in, double alpha) {
  if (op == UnaryOp::copy) {  // also converts between dtypes
    dispatch_all(out.dtype, [&](auto to) {
      dispatch_all(in.dtype, [&](auto from) {
        using TO = decltype(to);
        map1<TO, decltype(from)>(out, in, Convert<TO>{});
      });
    });
    return;
  }
  if (op == UnaryOp::logical_not) return map1<bool, bool>(out, in, Not{});
  if (op == UnaryOp::neg && in.dtype == DType::int64) return map1<std::int64_t, std::int64_t>(out, in, Neg{});
  dispatch_floating(in.dtype, "unary", [&](auto t) {
    using T = decltype(t);
    switch (op) {
      case UnaryOp::neg: return map1<T, T>(out, in, Neg{});
      case UnaryOp::exp: return map1<T, T>(out, in, Exp{});
      case UnaryOp::log: return map1<T, T>(out, in, Log{});
      case UnaryOp::sqrt: return map1<T, T>(out, in, Sqrt{});
      case UnaryOp::rsqrt: return map1<T, T>(out, in, Rsqrt{});
      case UnaryOp::tanh: return map1<T, T>(out, in, Tanh{});
      case UnaryOp::relu: return map1<T, T>(out, in, Relu{});
      case UnaryOp::gelu: return map1<T, T>(out, in, Gelu{});
      case UnaryOp::pow: return map1<T, T>(out, in, Pow<T>{static_cast<T>(alpha)});
      case UnaryOp::scale: return map1<T, T>(out, in, Scale<T>{static_cast<T>(alpha)});
      default: throw DTypeError("cuda backend: unary op not defined for this dtype");
    }
  });
}

void CudaBackend::binary(BinaryOp op, const TensorDesc& out, const TensorDesc& a, const TensorDesc& b) {
  switch (op) {
    case BinaryOp::eq:
    case BinaryOp::ne:
    case BinaryOp::lt:
    case BinaryOp::gt:
      return dispatch_all(a.dtype, [&](auto t) {
        using T = decltype(t);
        switch (op) {
          case BinaryOp::eq: return map2<bool, T>(out, a, b, Eq{});
          case BinaryOp::ne: return map2<bool, T>(out, a, b, Ne{});
          case BinaryOp::lt: return map2<bool, T>(out, a, b, Lt{});
          default: return map2<bool, T>(out, a, b, Gt{});
        }
      });
    default: break;
  }
  if (a.dtype == DType::int64) {
    using T = std::int64_t;
    switch (op) {
      case BinaryOp::add: return map2<T, T>(out, a, b, Add{});
      case BinaryOp::sub: return map2<T, T>(out, a, b, Sub{});
      case BinaryOp::mul: return map2<T, T>(out, a, b, Mul{});
      case BinaryOp::div: throw DTypeError("div: integer division is not supported; convert to a floating dtype first");
      default: throw DTypeError("cuda backend: binary op needs a floating dtype");
    }
  }
  dispatch_floating(a.dtype, "binary", [&](auto t) {
    using T = decltype(t);
    switch (op) {
      case BinaryOp::add: return map2<T, T>(out, a, b, Add{});
      case BinaryOp::sub: return map2<T, T>(out, a, b, Sub{});
      case BinaryOp::mul: return map2<T, T>(out, a, b, Mul{});
      case BinaryOp::div: return map2<T, T>(out, a, b, Div{});
      case BinaryOp::relu_backward: return map2<T, T>(out, a, b, ReluBackward{});
      case BinaryOp::gelu_backward: return map2<T, T>(out, a, b, GeluBackward{});
      case BinaryOp::tanh_backward: return map2<T, T>(out, a, b, TanhBackward{});
      default: return;
    }
  });
}

void CudaBackend::where(const TensorDesc& out, const TensorDesc& cond, const TensorDesc& a, const TensorDesc& b) {
  const std::int64_t n = out.numel();
  if (n == 0) return;
  dispatch_all(out.dtype, [&](auto t) {
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
