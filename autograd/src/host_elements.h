#pragma once
// One element in host memory as the engine reads and writes it (Tensor::at, to_vector, from_vector): a value
// of any dtype read as T, a double stored as any dtype. Host bytes only; device memory goes through a Backend.
#include <cstdint>
#include <cstring>

#include "autograd/bfloat16.h"
#include "autograd/dtype.h"

namespace stepformer::detail {

template <class T>
T load_as(const void* p, DType dt) {
  switch (dt) {
    case DType::float32: {
      float v;
      std::memcpy(&v, p, 4);
      return static_cast<T>(v);
    }
    case DType::float64: {
      double v;
      std::memcpy(&v, p, 8);
      return static_cast<T>(v);
    }
    case DType::int64: {
      std::int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<T>(v);
    }
    case DType::boolean: {
      std::uint8_t v;
      std::memcpy(&v, p, 1);
      return static_cast<T>(v != 0);
    }
    case DType::bfloat16: {
      std::uint16_t v;
      std::memcpy(&v, p, 2);
      return static_cast<T>(float_from_bf16_bits(v));
    }
  }
  return T{};
}

inline void store_from_double(void* p, DType dt, double value) {
  switch (dt) {
    case DType::float32: {
      float v = static_cast<float>(value);
      std::memcpy(p, &v, 4);
      break;
    }
    case DType::float64: std::memcpy(p, &value, 8); break;
    case DType::int64: {
      auto v = static_cast<std::int64_t>(value);
      std::memcpy(p, &v, 8);
      break;
    }
    case DType::boolean: {
      std::uint8_t v = value != 0;
      std::memcpy(p, &v, 1);
      break;
    }
    case DType::bfloat16: {  // through float32, as c10::BFloat16 converts a double
      const std::uint16_t v = bf16_bits_from_float(static_cast<float>(value));
      std::memcpy(p, &v, 2);
      break;
    }
  }
}

}  // namespace stepformer::detail
