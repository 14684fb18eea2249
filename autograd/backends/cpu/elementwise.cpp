// Elementwise kernels over strided operands (a stride of 0 is a broadcast). The formulas are shared with
// the other backends (../elementwise_math.h); what is the CPU's own is the loop: rows of the last dim,
// spread over OpenMP threads (strided.h). SiLU and its backward in float32 are the exception: the shared formula
// reads libm's double exp one element at a time, so the CPU gives it vmath.h's float exp_approx instead, in SIMD
// clones over unit-stride rows. The casts between float32 and bfloat16, and float32 add, sub and mul, take the same
// clones: map1 and map2, their strides known only at run time, reach at most SSE2's 4 lanes (behind a unit-stride
// check the compiler adds) in the baseline build. A copy within one dtype moves bits (copy_bits).
#include <cstring>

#include "../elementwise_math.h"
#include "cpu_backend.h"
#include "rows.h"
#include "strided.h"
#include "vmath.h"

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

STEPFORMER_SIMD_CLONES void silu_row(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = silu_from_exp(x[i], exp_approx(-x[i]));
}
STEPFORMER_SIMD_CLONES void silu_backward_row(const float* g, const float* x, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = g[i] * silu_derivative_from_exp(x[i], exp_approx(-x[i]));
}

STEPFORMER_SIMD_CLONES void silu_mul_row(const float* x, const float* y, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = silu_from_exp(x[i], exp_approx(-x[i])) * y[i];
}

// SiLU in float32: unit-stride rows through the clone, others element by element.
void silu_float(const TensorDesc& out, const TensorDesc& x) {
  for_each_row<2>({&out, &x}, [&](auto base, auto step, std::int64_t n) {
    float* o = ptr<float>(out) + base[0];
    const float* xr = ptr<float>(x) + base[1];
    if (step[0] == 1 && step[1] == 1) return silu_row(xr, o, n);
    for (std::int64_t i = 0; i < n; ++i) o[i * step[0]] = silu_from_exp(xr[i * step[1]], exp_approx(-xr[i * step[1]]));
  });
}

}  // namespace

STEPFORMER_SIMD_CLONES void round_row_to_bf16(const float* x, bfloat16* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = bfloat16(x[i]);
}
STEPFORMER_SIMD_CLONES void widen_row_from_bf16(const bfloat16* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(x[i]);
}
// The residual adds, here and in RMSNorm's pass (norm.cpp).
STEPFORMER_SIMD_CLONES void add_row(const float* a, const float* b, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

namespace {

// The float32 arithmetic that the models' element-wise passes are made of (residual adds, gradient sums), on
// unit-stride rows in the clones, 16 lanes with AVX-512 where map2 reaches SSE2's 4. One IEEE operation per element
// either way, so the bits are map2's.
STEPFORMER_SIMD_CLONES void sub_row(const float* a, const float* b, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] - b[i];
}
STEPFORMER_SIMD_CLONES void mul_row(const float* a, const float* b, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

// where in float32 on unit-stride rows of out, cond and a, with b a unit-stride row or one value (relu's backward
// and masked_fill's broadcast scalar). The selection is on the bits, so that the loop has no branch (with random
// signs, relu's would be mispredicted every other element) and vectorises; the same values as the strided loop
// in CpuBackend::where. (The builtin is std::bit_cast's own; see vmath.h.)
inline float select_bits(bool c, float a, float b) {
  const std::uint32_t keep = 0u - static_cast<std::uint32_t>(c);  // all ones or all zeros
  return __builtin_bit_cast(
      float, (__builtin_bit_cast(std::uint32_t, a) & keep) | (__builtin_bit_cast(std::uint32_t, b) & ~keep));
}
STEPFORMER_SIMD_CLONES void where_row(const bool* c, const float* a, const float* b, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = select_bits(c[i], a[i], b[i]);
}
STEPFORMER_SIMD_CLONES void where_row_value(const bool* c, const float* a, float b, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = select_bits(c[i], a[i], b);
}

// out = f(a, b) in float32: rows where all three are unit-stride go to `row`, a clone of the same loop.
template <class F>
void binary_float(const TensorDesc& out, const TensorDesc& a, const TensorDesc& b,
                  void (*row)(const float*, const float*, float*, std::int64_t), F f) {
  for_each_row<3>({&out, &a, &b}, [&](auto base, auto step, std::int64_t n) {
    float* o = ptr<float>(out) + base[0];
    const float* x = ptr<float>(a) + base[1];
    const float* y = ptr<float>(b) + base[2];
    if (step[0] == 1 && step[1] == 1 && step[2] == 1) return row(x, y, o, n);
    for (std::int64_t i = 0; i < n; ++i) o[i * step[0]] = f(x[i * step[1]], y[i * step[2]]);
  });
}

// A cast between float32 and bfloat16 (autocast's, and their backward): unit-stride rows through `row`, the clone
// of the same conversion, others element by element.
template <class TO, class TI>
void cast_rows(const TensorDesc& out, const TensorDesc& in, void (*row)(const TI*, TO*, std::int64_t)) {
  for_each_row<2>({&out, &in}, [&](auto base, auto step, std::int64_t n) {
    TO* o = ptr<TO>(out) + base[0];
    const TI* x = ptr<TI>(in) + base[1];
    if (step[0] == 1 && step[1] == 1) return row(x, o, n);
    for (std::int64_t i = 0; i < n; ++i) o[i * step[0]] = static_cast<TO>(x[i * step[1]]);
  });
}

// A copy within one dtype: the elements' bits, a unit-stride row in one memmove (copy_ may be given overlapping views).
// (Through map1 a bfloat16 copy would widen each element to float32 and round it back, one at a time: 4.4% of the base
// model's bf16 step, gathering attention's permuted heads.)
template <class U>
void copy_units(const TensorDesc& out, const TensorDesc& in) {
  for_each_row<2>({&out, &in}, [&](auto base, auto step, std::int64_t n) {
    U* o = ptr<U>(out) + base[0];
    const U* x = ptr<U>(in) + base[1];
    if (step[0] == 1 && step[1] == 1)
      return static_cast<void>(std::memmove(o, x, static_cast<std::size_t>(n) * sizeof(U)));
    for (std::int64_t i = 0; i < n; ++i) o[i * step[0]] = x[i * step[1]];
  });
}
void copy_bits(const TensorDesc& out, const TensorDesc& in) {
  switch (element_size(out.dtype)) {
    case 1: return copy_units<std::uint8_t>(out, in);
    case 2: return copy_units<std::uint16_t>(out, in);
    case 4: return copy_units<std::uint32_t>(out, in);
    default: return copy_units<std::uint64_t>(out, in);
  }
}

bool all_float32(std::initializer_list<const TensorDesc*> ds) {
  for (const TensorDesc* d : ds)
    if (d->dtype != DType::float32) return false;
  return true;
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
  if (op == UnaryOp::silu && all_float32({&out, &in})) return silu_float(out, in);
  if (op == UnaryOp::copy && out.dtype == in.dtype) return copy_bits(out, in);
  if (op == UnaryOp::copy && out.dtype == DType::bfloat16 && in.dtype == DType::float32)
    return cast_rows(out, in, round_row_to_bf16);
  if (op == UnaryOp::copy && out.dtype == DType::float32 && in.dtype == DType::bfloat16)
    return cast_rows(out, in, widen_row_from_bf16);
  dispatch_unary(op, out.dtype, in.dtype, alpha, "cpu",
                 [&](auto f, auto to, auto from) { map1<decltype(to), decltype(from)>(out, in, f); });
}

namespace {
// Any dtype and op through the shared formulas (map2).
void map_binary(BinaryOp op, const TensorDesc& out, const TensorDesc& a, const TensorDesc& b) {
  dispatch_binary(op, a.dtype, "cpu", [&](auto f, auto to, auto t) { map2<decltype(to), decltype(t)>(out, a, b, f); });
}
}  // namespace

void CpuBackend::binary(BinaryOp op, const TensorDesc& out, const TensorDesc& a, const TensorDesc& b) {
  if (!all_float32({&out, &a, &b})) return map_binary(op, out, a, b);
  switch (op) {
    case BinaryOp::add: return binary_float(out, a, b, add_row, [](float x, float y) { return x + y; });
    case BinaryOp::sub: return binary_float(out, a, b, sub_row, [](float x, float y) { return x - y; });
    case BinaryOp::mul: return binary_float(out, a, b, mul_row, [](float x, float y) { return x * y; });
    case BinaryOp::silu_backward:  // g, x
      return binary_float(out, a, b, silu_backward_row,
                          [](float g, float x) { return g * silu_derivative_from_exp(x, exp_approx(-x)); });
    case BinaryOp::silu_mul:  // gate, value
      return binary_float(out, a, b, silu_mul_row,
                          [](float x, float y) { return silu_from_exp(x, exp_approx(-x)) * y; });
    default: return map_binary(op, out, a, b);
  }
}

void CpuBackend::where(const TensorDesc& out, const TensorDesc& cond, const TensorDesc& a, const TensorDesc& b) {
  dispatch_storage(out.dtype, [&](auto t) {
    using T = decltype(t);
    for_each_row<4>({&out, &cond, &a, &b}, [&](auto base, auto step, std::int64_t n) {
      T* o = ptr<T>(out) + base[0];
      const bool* c = ptr<bool>(cond) + base[1];
      const T* x = ptr<T>(a) + base[2];
      const T* y = ptr<T>(b) + base[3];
      if constexpr (std::is_same_v<T, float>) {
        if (step[0] == 1 && step[1] == 1 && step[2] == 1 && step[3] == 1) return where_row(c, x, y, o, n);
        if (step[0] == 1 && step[1] == 1 && step[2] == 1 && step[3] == 0) return where_row_value(c, x, *y, o, n);
      }
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
