#pragma once
// The elementwise functions of the Backend interface (UnaryOp, BinaryOp), written once for every backend:
// the reference loops, the fast CPU backend and the CUDA kernels all call unary_value / binary_value, and
// all turn a runtime op into these formulas through one dispatch, dispatch_unary / dispatch_binary.
// Under nvcc the functions are __host__ __device__; under g++ (the CPU backends and cuda-sim) plain inline.
//
// A new UnaryOp or BinaryOp (backend.h's lists) without a formula here does not compile (the static_asserts
// below); an op a dtype has no formula for throws DTypeError naming the op, the dtype and the device.
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "autograd/backend.h"
#include "autograd/errors.h"
#include "dispatch.h"

#if defined(__CUDACC__)
#define STEPFORMER_MATH_FN __host__ __device__ inline
#else
#define STEPFORMER_MATH_FN inline
#endif

namespace stepformer {

// libm for float and for double (CUDA's device code names the float versions expf, logf, ...).
STEPFORMER_MATH_FN float exp_(float x) { return expf(x); }
STEPFORMER_MATH_FN double exp_(double x) { return ::exp(x); }
STEPFORMER_MATH_FN float log_(float x) { return logf(x); }
STEPFORMER_MATH_FN double log_(double x) { return ::log(x); }
STEPFORMER_MATH_FN float sqrt_(float x) { return sqrtf(x); }
STEPFORMER_MATH_FN double sqrt_(double x) { return ::sqrt(x); }
STEPFORMER_MATH_FN float tanh_(float x) { return tanhf(x); }
STEPFORMER_MATH_FN double tanh_(double x) { return ::tanh(x); }
STEPFORMER_MATH_FN float pow_(float x, float p) { return powf(x, p); }
STEPFORMER_MATH_FN double pow_(double x, double p) { return ::pow(x, p); }
STEPFORMER_MATH_FN float nextafter_(float x, float y) { return nextafterf(x, y); }
STEPFORMER_MATH_FN double nextafter_(double x, double y) { return ::nextafter(x, y); }

// GELU, exact (erf) form as torch.nn.GELU(): x Phi(x), and its derivative Phi(x) + x phi(x), in double.
STEPFORMER_MATH_FN double gelu_value(double x) { return 0.5 * x * (1.0 + ::erf(x * 0.70710678118654752440)); }
STEPFORMER_MATH_FN double gelu_derivative(double x) {
  return 0.5 * (1.0 + ::erf(x * 0.70710678118654752440)) + x * 0.39894228040143267794 * ::exp(-0.5 * x * x);
}

// SiLU (Ramachandran et al. 2017; torch.nn.SiLU): x sigmoid(x), and its derivative s (1 + x (1 - s)), from
// e = exp(-x). Here in double through libm's exp; the CPU backend's float32 path passes its own vectorised exp
// (cpu/vmath.h's exp_approx). exp(-x) overflows to inf for very negative x; x / inf is then -0 and s is 0, so both
// stay finite.
template <class T>
STEPFORMER_MATH_FN T silu_from_exp(T x, T e) {
  return x / (T(1) + e);
}
template <class T>
STEPFORMER_MATH_FN T silu_derivative_from_exp(T x, T e) {
  const T s = T(1) / (T(1) + e);
  return s * (T(1) + x * (T(1) - s));
}
STEPFORMER_MATH_FN double silu_value(double x) { return silu_from_exp(x, ::exp(-x)); }
STEPFORMER_MATH_FN double silu_derivative(double x) { return silu_derivative_from_exp(x, ::exp(-x)); }

template <auto>
inline constexpr bool kNoFormula = false;

// y = op(x); alpha is pow's exponent and the number of scale, add_scalar and div_scalar. (copy converts dtypes: see
// dispatch_unary.)
template <UnaryOp op, class T>
STEPFORMER_MATH_FN T unary_value(T x, T alpha) {
  if constexpr (op == UnaryOp::copy)
    return x;
  else if constexpr (op == UnaryOp::neg)
    return -x;
  else if constexpr (op == UnaryOp::exp)
    return exp_(x);
  else if constexpr (op == UnaryOp::log)
    return log_(x);
  else if constexpr (op == UnaryOp::sqrt)
    return sqrt_(x);
  else if constexpr (op == UnaryOp::rsqrt)
    return T(1) / sqrt_(x);
  else if constexpr (op == UnaryOp::tanh)
    return tanh_(x);
  else if constexpr (op == UnaryOp::relu)
    return x > T(0) ? x : T(0);
  else if constexpr (op == UnaryOp::gelu)
    return static_cast<T>(gelu_value(x));
  else if constexpr (op == UnaryOp::silu)
    return static_cast<T>(silu_value(x));
  else if constexpr (op == UnaryOp::pow)
    return pow_(x, alpha);
  else if constexpr (op == UnaryOp::scale)
    return x * alpha;
  else if constexpr (op == UnaryOp::add_scalar)
    return x + alpha;
  else if constexpr (op == UnaryOp::div_scalar)
    return x / alpha;
  else if constexpr (op == UnaryOp::logical_not)
    return !x;
  else
    static_assert(kNoFormula<op>, "unary_value: a UnaryOp without a formula");
}

// The result type of a binary op on T: the comparisons give bool.
template <BinaryOp op, class T>
using binary_result_t =
    std::conditional_t<op == BinaryOp::eq || op == BinaryOp::ne || op == BinaryOp::lt || op == BinaryOp::gt, bool, T>;

template <BinaryOp op, class T>
STEPFORMER_MATH_FN binary_result_t<op, T> binary_value(T x, T y) {
  if constexpr (op == BinaryOp::add)
    return x + y;
  else if constexpr (op == BinaryOp::sub)
    return x - y;
  else if constexpr (op == BinaryOp::mul)
    return x * y;
  else if constexpr (op == BinaryOp::div)
    return x / y;
  else if constexpr (op == BinaryOp::eq)
    return x == y;
  else if constexpr (op == BinaryOp::ne)
    return x != y;
  else if constexpr (op == BinaryOp::lt)
    return x < y;
  else if constexpr (op == BinaryOp::gt)
    return x > y;
  else if constexpr (op == BinaryOp::gelu_backward)
    return x * static_cast<T>(gelu_derivative(y));  // g, x
  else if constexpr (op == BinaryOp::silu_backward)
    return x * static_cast<T>(silu_derivative(y));  // g, x
  else if constexpr (op == BinaryOp::tanh_backward)
    return x * (T(1) - y * y);  // g, y
  else if constexpr (op == BinaryOp::silu_mul)
    return static_cast<T>(silu_value(x)) * y;  // gate, value
  else
    static_assert(kNoFormula<op>, "binary_value: a BinaryOp without a formula");
}

// The formulas as function objects, for kernels that take one as a parameter (CUDA kernels cannot take a
// host lambda). UnaryFn<op, TO, TI> reads a TI and writes a TO (they differ only for copy).
template <UnaryOp op, class TO, class TI = TO>
struct UnaryFn {
  TI alpha;
  STEPFORMER_MATH_FN TO operator()(TI x) const {
    if constexpr (op == UnaryOp::copy)
      return static_cast<TO>(x);
    else
      return unary_value<op, TI>(x, alpha);
  }
};
template <BinaryOp op, class T>
struct BinaryFn {
  STEPFORMER_MATH_FN binary_result_t<op, T> operator()(T x, T y) const { return binary_value<op, T>(x, y); }
};

inline const char* op_name(UnaryOp op) {
  switch (op) {
#define STEPFORMER_CASE(name) \
  case UnaryOp::name: return #name;
    STEPFORMER_UNARY_OPS(STEPFORMER_CASE)
#undef STEPFORMER_CASE
  }
  return "?";
}
inline const char* op_name(BinaryOp op) {
  switch (op) {
#define STEPFORMER_CASE(name) \
  case BinaryOp::name: return #name;
    STEPFORMER_BINARY_OPS(STEPFORMER_CASE)
#undef STEPFORMER_CASE
  }
  return "?";
}

namespace detail {
template <class T>
inline constexpr bool is_float_v = std::is_same_v<T, float> || std::is_same_v<T, double>;

// Which dtypes each op has a formula for.
template <UnaryOp op, class T>
inline constexpr bool unary_defined = op == UnaryOp::logical_not ? std::is_same_v<T, bool>
                                      : op == UnaryOp::neg       ? (is_float_v<T> || std::is_same_v<T, std::int64_t>)
                                                                 : is_float_v<T>;
template <BinaryOp op, class T>
inline constexpr bool binary_defined = (op == BinaryOp::eq || op == BinaryOp::ne || op == BinaryOp::lt ||
                                        op == BinaryOp::gt)
                                           ? true
                                       : (op == BinaryOp::add || op == BinaryOp::sub || op == BinaryOp::mul)
                                           ? (is_float_v<T> || std::is_same_v<T, std::int64_t>)
                                           : is_float_v<T>;

[[noreturn]] inline void no_formula(const char* kind, const char* op, DType dtype, const char* device) {
  if (std::string(op) == "div" && dtype == DType::int64)
    throw DTypeError("div: integer division is not supported; convert to a floating dtype first");
  throw DTypeError(std::string(device) + " backend: " + kind + " op '" + op + "' is not defined for " +
                   std::string(dtype_name(dtype)));
}
[[noreturn]] inline void unknown_op(const char* kind, int value, const char* device) {
  throw NotImplemented(std::string(device) + " backend: " + kind + " op #" + std::to_string(value) + " has no kernel");
}
}  // namespace detail

// Calls map(UnaryFn<op, TO, TI>{alpha}, TO{}, TI{}) for the runtime op and dtypes: `map` is the backend's
// strided loop (or kernel launch). copy takes any pair of dtypes; every other op needs out == in.
template <class Map>
void dispatch_unary(UnaryOp op, DType out, DType in, double alpha, const char* device, Map&& map) {
  if (op == UnaryOp::copy) {
    dispatch_storage(out, [&](auto to) {
      dispatch_storage(in, [&](auto from) {
        using TO = decltype(to);
        using TI = decltype(from);
        map(UnaryFn<UnaryOp::copy, TO, TI>{TI{}}, TO{}, TI{});
      });
    });
    return;
  }
  auto with_op = [&](auto kind) {
    constexpr UnaryOp k = decltype(kind)::value;
    dispatch_all(in, [&](auto t) {
      using T = decltype(t);
      if constexpr (detail::unary_defined<k, T>)
        map(UnaryFn<k, T>{static_cast<T>(alpha)}, T{}, T{});
      else
        detail::no_formula("unary", op_name(k), in, device);
    });
  };
  switch (op) {
#define STEPFORMER_CASE(name) \
  case UnaryOp::name: return with_op(std::integral_constant<UnaryOp, UnaryOp::name>{});
    STEPFORMER_UNARY_OPS(STEPFORMER_CASE)
#undef STEPFORMER_CASE
  }
  detail::unknown_op("unary", static_cast<int>(op), device);
}

// Calls map(BinaryFn<op, T>{}, TO{}, T{}) for the runtime op and the operands' dtype T (TO is bool for
// the comparisons, T otherwise).
template <class Map>
void dispatch_binary(BinaryOp op, DType dtype, const char* device, Map&& map) {
  auto with_op = [&](auto kind) {
    constexpr BinaryOp k = decltype(kind)::value;
    dispatch_all(dtype, [&](auto t) {
      using T = decltype(t);
      if constexpr (detail::binary_defined<k, T>)
        map(BinaryFn<k, T>{}, binary_result_t<k, T>{}, T{});
      else
        detail::no_formula("binary", op_name(k), dtype, device);
    });
  };
  switch (op) {
#define STEPFORMER_CASE(name) \
  case BinaryOp::name: return with_op(std::integral_constant<BinaryOp, BinaryOp::name>{});
    STEPFORMER_BINARY_OPS(STEPFORMER_CASE)
#undef STEPFORMER_CASE
  }
  detail::unknown_op("binary", static_cast<int>(op), device);
}

// One Adam / AdamW step on one element (Kingma & Ba 2015, Algorithm 1; Loshchilov & Hutter 2019 for the
// decoupled decay), in double, in the operation order of torch.optim.Adam / AdamW (foreach=False):
//   Adam:  g += wd p            AdamW: p *= 1 - lr wd
//   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2
//   p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// Every backend's adam_update is a loop (or a grid) over this; what is a backend's own is only the mapping.
struct AdamStep {
  double lr, beta1, beta2, eps, weight_decay;
  double bc1, bc2;  // the bias corrections 1 - beta1^t and 1 - beta2^t, once per step
  bool decoupled;
};
inline AdamStep adam_step(const AdamConfig& cfg) {  // host: std::pow once per step, not per element
  return {cfg.lr,
          cfg.beta1,
          cfg.beta2,
          cfg.eps,
          cfg.weight_decay,
          1.0 - std::pow(cfg.beta1, static_cast<double>(cfg.step)),
          1.0 - std::pow(cfg.beta2, static_cast<double>(cfg.step)),
          cfg.decoupled};
}
// The step with AdamConfig::step_values' lr and bias corrections where `values` is not null (read where it lies: on
// a GPU, by each thread).
STEPFORMER_MATH_FN AdamStep at_step_values(AdamStep s, const double* values) {
  if (values) s.lr = values[0], s.bc1 = values[1], s.bc2 = values[2];
  return s;
}
template <class T>
STEPFORMER_MATH_FN void adam_element(T& param, T grad, T& m, T& v, const AdamStep& s) {
  double g = grad, p = param;
  if (s.decoupled)
    p *= 1.0 - s.lr * s.weight_decay;  // AdamW: decay the weight itself
  else
    g += s.weight_decay * p;  // Adam: L2 term in the gradient
  const double mi = s.beta1 * m + (1 - s.beta1) * g;
  const double vi = s.beta2 * v + (1 - s.beta2) * g * g;
  p -= s.lr * (mi / s.bc1) / (sqrt_(vi / s.bc2) + s.eps);
  m = static_cast<T>(mi);
  v = static_cast<T>(vi);
  param = static_cast<T>(p);
}

// Cross-entropy with label smoothing s (Szegedy et al. 2016, section 7; torch's cross_entropy(label_smoothing=s))
// of one row of C logits x with target t, given the row's log-sum-exp lse and the sum of its logits:
//   loss = -(1 - s) log p_t - (s / C) sum_c log p_c,  log p_c = x_c - lse,  so  sum_c log p_c = sum_x - C lse
// A row whose target is ignore_index (a PAD position) has loss 0 and gradient 0. Every backend's
// cross_entropy_forward and _backward computes lse, sum_x and p_c its own way (its mapping) and these formulas.
STEPFORMER_MATH_FN double smoothed_cross_entropy(bool ignored, double x_target, double sum_x, double lse, double C,
                                                 double smoothing) {
  // EXERCISE 7.2: an ignored (PAD) row adds 0; else (1-s) * -log p[target] + s * mean of -log p
  if (ignored) return 0.0;
  const double nll = -(x_target - lse);
  return (1 - smoothing) * nll - smoothing / C * (sum_x - C * lse);
  // END EXERCISE
}
// d loss / d x_c times the upstream gradient g, from p_c = exp(x_c - lse) (the forward's lse): softmax minus the
// smoothed one-hot target, g (p_c - s / C) - g (1 - s) [c == t]. In two parts, as every backend applies them: the
// share of every class, then what the target class gets less (a separate subtraction, so that no compiler fuses
// the two products into one rounding on some paths and not on others: results must not depend on alignment).
template <class T>
STEPFORMER_MATH_FN T smoothed_cross_entropy_grad(bool ignored, T p, T g, double smoothing, double C) {
  // EXERCISE 7.2 (continued)
  if (ignored) return T(0);
  return g * (p - static_cast<T>(smoothing / C));
  // END EXERCISE
}
template <class T>
STEPFORMER_MATH_FN T smoothed_cross_entropy_target_grad(bool ignored, T g, double smoothing) {
  // EXERCISE 7.2 (continued)
  if (ignored) return T(0);
  return g * static_cast<T>(1 - smoothing);
  // END EXERCISE
}

// RMSNorm of one row of D (Zhang & Sennrich 2019, equation 4; torch.nn.functional.rms_norm): layer norm without
// the mean. Every backend's rms_norm_forward and _backward sums over the row its own way (its mapping) and applies
// these formulas:
//   rstd = 1 / sqrt(mean(x^2) + eps),  y = x rstd g
// Backward, with gx = dy g, xhat = x rstd and c = mean(gx xhat) (docs/12_modern_lm.md derives it):
//   dx = rstd (gx - xhat c),  dg = sum over rows of dy xhat
// rstd depends on every x of the row, hence the xhat c term: the part of dx that flows back through rstd.
template <class T>
STEPFORMER_MATH_FN T rms_norm_rstd(T sum_of_squares, std::int64_t D, T eps) {
  // EXERCISE 12.1: rstd = 1 / sqrt(mean of the row's squares + eps) — no mean subtracted, eps under the root
  return T(1) / sqrt_(sum_of_squares / static_cast<T>(D) + eps);
  // END EXERCISE
}
template <class T>
STEPFORMER_MATH_FN T rms_norm_dx(T gx, T xhat, T rstd, T mean_gx_xhat) {
  // EXERCISE 12.1 (continued)
  return rstd * (gx - xhat * mean_gx_xhat);
  // END EXERCISE
}

// RoPE's rotation of one coordinate pair (a, b) by the angle whose cosine and sine are c and s (RoFormer, Su et al.
// 2021, equation 34): (a c - b s, b c + a s). The backward rotates the gradient by the opposite angle (s -> -s):
// a rotation's transpose is its inverse.
template <class T>
STEPFORMER_MATH_FN void rotate_pair(T a, T b, T c, T s, T& ra, T& rb) {
  ra = a * c - b * s;
  rb = b * c + a * s;
}

}  // namespace stepformer
