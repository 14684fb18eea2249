#pragma once
// Element types. float32 is the working type; float64 exists for gradient checks; int64 holds token
// ids and indices; boolean (one byte per element, 0 or 1) holds masks, as torch.bool does.
// bfloat16 (autograd/bfloat16.h) is a storage type, as on CPUs: matmul reads it natively (float32
// accumulation); elementwise ops and reductions compute in float32 and round their result once; the row
// ops (softmax, layer norm, losses, embedding, dropout) and the optimizer need float32 and say so.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace stepformer {

enum class DType : std::uint8_t { float32, float64, int64, boolean, bfloat16 };

constexpr std::size_t element_size(DType t) {
  switch (t) {
    case DType::float32: return 4;
    case DType::float64: return 8;
    case DType::int64: return 8;
    case DType::boolean: return 1;
    case DType::bfloat16: return 2;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::int64: return "int64";
    case DType::boolean: return "bool";
    case DType::bfloat16: return "bfloat16";
  }
  return "?";
}

// Floating types can require grad and carry gradients.
constexpr bool is_floating(DType t) { return t == DType::float32 || t == DType::float64 || t == DType::bfloat16; }

}  // namespace stepformer
