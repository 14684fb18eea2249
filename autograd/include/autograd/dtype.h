#pragma once
// Element types. float32 is the working type; float64 exists for gradient checks; int64 holds token
// ids and indices; boolean (one byte per element, 0 or 1) holds masks, as torch.bool does.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace stepformer {

enum class DType : std::uint8_t { float32, float64, int64, boolean };

constexpr std::size_t element_size(DType t) {
  switch (t) {
    case DType::float32: return 4;
    case DType::float64: return 8;
    case DType::int64: return 8;
    case DType::boolean: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::int64: return "int64";
    case DType::boolean: return "bool";
  }
  return "?";
}

constexpr bool is_floating(DType t) { return t == DType::float32 || t == DType::float64; }

}  // namespace stepformer
