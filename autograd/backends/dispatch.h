#pragma once
// Calling a kernel template with the C++ type of a DType: shared by the CPU and CUDA backends (host code).
#include <cstdint>
#include <string>

#include "autograd/dtype.h"
#include "autograd/errors.h"

namespace stepformer {

// Calls f(T{}) with T the element type of `dtype`.
template <class F>
decltype(auto) dispatch_all(DType dtype, F&& f) {
  switch (dtype) {
    case DType::float32: return f(float{});
    case DType::float64: return f(double{});
    case DType::int64: return f(std::int64_t{});
    case DType::boolean: return f(bool{});
  }
  throw DTypeError("backend: unknown dtype");
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

}  // namespace stepformer
