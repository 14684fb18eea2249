#pragma once
// Calling a kernel template with the C++ type of a DType: shared by the CPU and CUDA backends (host code).
#include <cstdint>
#include <string>

#include "autograd/bfloat16.h"
#include "autograd/dtype.h"
#include "autograd/errors.h"

namespace stepformer {

// Calls f(T{}) with T the element type of `dtype`, for the types kernels compute in. A bfloat16 operand
// never gets here: the ops convert it to float32 first (dtype.h), so reaching this is an engine bug.
template <class F>
decltype(auto) dispatch_all(DType dtype, F&& f) {
  switch (dtype) {
    case DType::float32: return f(float{});
    case DType::float64: return f(double{});
    case DType::int64: return f(std::int64_t{});
    case DType::boolean: return f(bool{});
    case DType::bfloat16: break;
  }
  throw DTypeError("backend: a kernel that computes in float32, float64, int64 or bool got " +
                   std::string(dtype_name(dtype)) + " (internal: the op should have converted it)");
}

// The same plus bfloat16, for the kernels that only move or convert elements (copy, fill).
template <class F>
decltype(auto) dispatch_storage(DType dtype, F&& f) {
  if (dtype == DType::bfloat16) return f(bfloat16{});
  return dispatch_all(dtype, f);
}

// The same for the floating types; any other is a DTypeError naming the kernel.
template <class F>
decltype(auto) dispatch_floating(DType dtype, const char* kernel, F&& f) {
  switch (dtype) {
    case DType::float32: return f(float{});
    case DType::float64: return f(double{});
    default: throw DTypeError(std::string(kernel) + " needs float32 or float64, got " + std::string(dtype_name(dtype)));
  }
}

// The floating types and bfloat16, for the kernels that take bfloat16 operands and compute in float32 (attention).
template <class F>
decltype(auto) dispatch_operands(DType dtype, const char* kernel, F&& f) {
  switch (dtype) {
    case DType::float32: return f(float{});
    case DType::float64: return f(double{});
    case DType::bfloat16: return f(bfloat16{});
    default:
      throw DTypeError(std::string(kernel) + " needs float32, float64 or bfloat16, got " +
                       std::string(dtype_name(dtype)));
  }
}

// The GEMM's operand types: calls f(TC{}, TAB{}) with TAB the type of a and b and TC the type of c: both
// float32, both float64, or bfloat16 operands with a float32 or bfloat16 product (float32 accumulation).
template <class F>
decltype(auto) dispatch_gemm(DType c, DType ab, const char* kernel, F&& f) {
  if (ab == DType::bfloat16 && c == DType::float32) return f(float{}, bfloat16{});
  if (ab == DType::bfloat16 && c == DType::bfloat16) return f(bfloat16{}, bfloat16{});
  if (ab == c && c == DType::float32) return f(float{}, float{});
  if (ab == c && c == DType::float64) return f(double{}, double{});
  throw DTypeError(std::string(kernel) + ": operands " + std::string(dtype_name(ab)) + " and product " +
                   std::string(dtype_name(c)) + " are not a GEMM this backend has (float32, float64, or bfloat16 " +
                   "operands with a float32 or bfloat16 product)");
}

}  // namespace stepformer
