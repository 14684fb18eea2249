// Elementwise kernels over strided operands (a stride of 0 is a broadcast).
#include <cmath>

#include "cpu_backend.h"
#include "strided.h"

namespace stepformer::cpu {

namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

template <class T>
T gelu(T x) {
  return static_cast<T>(0.5 * x * (1.0 + std::erf(x * kInvSqrt2)));
}
template <class T>
T gelu_grad(T x) {  // d/dx x Phi(x) = Phi(x) + x phi(x)
  return static_cast<T>(0.5 * (1.0 + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x));
}

template <class TO, class TI, class F>
void map1(const TensorDesc& out, const TensorDesc& in, F f) {
  for_each_row<2>({&out, &in}, [&](auto base, auto step, std::int64_t n) {
    TO* o = ptr<TO>(out) + base[0];
    const TI* x = ptr<TI>(in) + base[1];
    for (std::int64_t i = 0; i < n; ++i) o[i * step[0]] = f(x[i * step[1]]);
  });
}

template <class TO, class T, class F>
void map2(const TensorDesc& out, const TensorDesc& a, const TensorDesc& b, F f) {
  for_each_row<3>({&out, &a, &b}, [&](auto base, auto step, std::int64_t n) {
    TO* o = ptr<TO>(out) + base[0];
    const T* x = ptr<T>(a) + base[1];
    const T* y = ptr<T>(b) + base[2];
    for (std::int64_t i = 0; i < n; ++i) o[i * step[0]] = f(x[i * step[1]], y[i * step[2]]);
  });
}

}  // namespace

void CpuBackend::fill(const TensorDesc& out, double value) {
  dispatch_all(out.dtype, [&](auto t) {
    using T = decltype(t);
    const T v = static_cast<T>(value);
    for_each_row<1>({&out}, [&](auto base, auto step, std::int64_t n) {
      T* o = ptr<T>(out) + base[0];
      for (std::int64_t i = 0; i < n; ++i) o[i * step[0]] = v;
    });
  });
}

void CpuBackend::unary(UnaryOp op, const TensorDesc& out, const TensorDesc& in, double alpha) {
  if (op == UnaryOp::copy) {  // also converts between dtypes
    dispatch_all(out.dtype, [&](auto to) {
      dispatch_all(in.dtype, [&](auto from) {
        using TO = decltype(to);
        map1<TO, decltype(from)>(out, in, [](auto x) { return static_cast<TO>(x); });
      });
    });
    return;
  }
  if (op == UnaryOp::logical_not) {
    map1<bool, bool>(out, in, [](bool x) { return !x; });
    return;
  }
  if (op == UnaryOp::neg && in.dtype == DType::int64) {
    map1<std::int64_t, std::int64_t>(out, in, [](std::int64_t x) { return -x; });
    return;
  }
  dispatch_floating(in.dtype, "unary", [&](auto t) {
    using T = decltype(t);
    const T a = static_cast<T>(alpha);
    switch (op) {
      case UnaryOp::neg: return map1<T, T>(out, in, [](T x) { return -x; });
      case UnaryOp::exp: return map1<T, T>(out, in, [](T x) { return std::exp(x); });
      case UnaryOp::log: return map1<T, T>(out, in, [](T x) { return std::log(x); });
      case UnaryOp::sqrt: return map1<T, T>(out, in, [](T x) { return std::sqrt(x); });
      case UnaryOp::rsqrt: return map1<T, T>(out, in, [](T x) { return T(1) / std::sqrt(x); });
      case UnaryOp::tanh: return map1<T, T>(out, in, [](T x) { return std::tanh(x); });
      case UnaryOp::relu: return map1<T, T>(out, in, [](T x) { return x > T(0) ? x : T(0); });
      case UnaryOp::gelu: return map1<T, T>(out, in, [](T x) { return gelu(x); });
      case UnaryOp::pow: return map1<T, T>(out, in, [a](T x) { return std::pow(x, a); });
      case UnaryOp::scale: return map1<T, T>(out, in, [a](T x) { return x * a; });
      default: throw DTypeError("cpu backend: unary op not defined for this dtype");
    }
  });
}

void CpuBackend::binary(BinaryOp op, const TensorDesc& out, const TensorDesc& a, const TensorDesc& b) {
  switch (op) {
    case BinaryOp::eq:
    case BinaryOp::ne:
    case BinaryOp::lt:
    case BinaryOp::gt:
      return dispatch_all(a.dtype, [&](auto t) {
        using T = decltype(t);
        switch (op) {
          case BinaryOp::eq: return map2<bool, T>(out, a, b, [](T x, T y) { return x == y; });
          case BinaryOp::ne: return map2<bool, T>(out, a, b, [](T x, T y) { return x != y; });
          case BinaryOp::lt: return map2<bool, T>(out, a, b, [](T x, T y) { return x < y; });
          default: return map2<bool, T>(out, a, b, [](T x, T y) { return x > y; });
        }
      });
    default: break;
  }
  if (a.dtype == DType::int64) {
    using T = std::int64_t;
    switch (op) {
      case BinaryOp::add: return map2<T, T>(out, a, b, [](T x, T y) { return x + y; });
      case BinaryOp::sub: return map2<T, T>(out, a, b, [](T x, T y) { return x - y; });
      case BinaryOp::mul: return map2<T, T>(out, a, b, [](T x, T y) { return x * y; });
      case BinaryOp::div: throw DTypeError("div: integer division is not supported; convert to a floating dtype first");
      default: throw DTypeError("cpu backend: binary op needs a floating dtype");
    }
  }
  dispatch_floating(a.dtype, "binary", [&](auto t) {
    using T = decltype(t);
    switch (op) {
      case BinaryOp::add: return map2<T, T>(out, a, b, [](T x, T y) { return x + y; });
      case BinaryOp::sub: return map2<T, T>(out, a, b, [](T x, T y) { return x - y; });
      case BinaryOp::mul: return map2<T, T>(out, a, b, [](T x, T y) { return x * y; });
      case BinaryOp::div: return map2<T, T>(out, a, b, [](T x, T y) { return x / y; });
      case BinaryOp::relu_backward: return map2<T, T>(out, a, b, [](T g, T x) { return x > T(0) ? g : T(0); });
      case BinaryOp::gelu_backward: return map2<T, T>(out, a, b, [](T g, T x) { return g * gelu_grad(x); });
      case BinaryOp::tanh_backward: return map2<T, T>(out, a, b, [](T g, T y) { return g * (T(1) - y * y); });
      default: return;
    }
  });
}

void CpuBackend::where(const TensorDesc& out, const TensorDesc& cond, const TensorDesc& a, const TensorDesc& b) {
  dispatch_all(out.dtype, [&](auto t) {
    using T = decltype(t);
    for_each_row<4>({&out, &cond, &a, &b}, [&](auto base, auto step, std::int64_t n) {
      T* o = ptr<T>(out) + base[0];
      const bool* c = ptr<bool>(cond) + base[1];
      const T* x = ptr<T>(a) + base[2];
      const T* y = ptr<T>(b) + base[3];
      for (std::int64_t i = 0; i < n; ++i) o[i * step[0]] = c[i * step[1]] ? x[i * step[2]] : y[i * step[3]];
    });
  });
}

void CpuBackend::accumulate(const TensorDesc& out, const TensorDesc& in, double alpha) {
  dispatch_all(out.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool>) {
      throw DTypeError("cpu backend: cannot accumulate into a bool tensor");
    } else {
      const T a = static_cast<T>(alpha);
      for_each_row<2>({&out, &in}, [&](auto base, auto step, std::int64_t n) {
        T* o = ptr<T>(out) + base[0];
        const T* x = ptr<T>(in) + base[1];
        for (std::int64_t i = 0; i < n; ++i) o[i * step[0]] += a * x[i * step[1]];
      });
    }
  });
}

}  // namespace stepformer::cpu
