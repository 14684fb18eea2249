#pragma once
// Unit-stride rows that other kernels share with the element-wise ones, vectorised in elementwise.cpp's SIMD clones:
// converted between float32 and bfloat16 (bfloat16(float)'s rounding, and the exact widening back), and float32
// rows added (one IEEE add per element, the bits of BinaryOp::add).
#include <cstdint>

#include "autograd/bfloat16.h"

namespace stepformer::cpu {

void round_row_to_bf16(const float* x, bfloat16* y, std::int64_t n);
void widen_row_from_bf16(const bfloat16* x, float* y, std::int64_t n);
void add_row(const float* a, const float* b, float* y, std::int64_t n);

}  // namespace stepformer::cpu
