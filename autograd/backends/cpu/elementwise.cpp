// Elementwise kernels over strided operands (a stride of 0 is a broadcast). The formulas are shared with
// the other backends (../elementwise_math.h); what is the CPU's own is the loop: rows of the last dim,
// spread over OpenMP threads (strided.h).
#include "../elementwise_math.h"
#include "cpu_backend.h"
#include "strided.h"

namespace stepformer::cpu {

namespace {

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
  dispatch_storage(out.dtype, [&](auto t) {
    using T = decltype(t);
    const T v = static_cast<T>(value);
    for_each_row<1>({&out}, [&](auto base, auto step, std::int64_t n) {
      T* o = ptr<T>(out) + base[0];
      for (std::int64_t i = 0; i < n; ++i) o[i * step[0]] = v;
    });
  });
}

void CpuBackend::unary(UnaryOp op, const TensorDesc& out, const TensorDesc& in, double alpha) {
  dispatch_unary(op, out.dtype, in.dtype, alpha, "cpu",
                 [&](auto f, auto to, auto from) { map1<decltype(to), decltype(from)>(out, in, f); });
}

void CpuBackend::binary(BinaryOp op, const TensorDesc& out, const TensorDesc& a, const TensorDesc& b) {
  dispatch_binary(op, a.dtype, "cpu", [&](auto f, auto to, auto t) { map2<decltype(to), decltype(t)>(out, a, b, f); });
}

void CpuBackend::where(const TensorDesc& out, const TensorDesc& cond, const TensorDesc& a, const TensorDesc& b) {
  dispatch_storage(out.dtype, [&](auto t) {
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
