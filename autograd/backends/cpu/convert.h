#pragma once
// Unit-stride rows converted between float32 and bfloat16, vectorised (elementwise.cpp): bfloat16(float)'s
// rounding, and the exact widening back.
#include <cstdint>

#include "autograd/bfloat16.h"

namespace stepformer::cpu {

void round_row_to_bf16(const float* x, bfloat16* y, std::int64_t n);
void widen_row_from_bf16(const bfloat16* x, float* y, std::int64_t n);

}  // namespace stepformer::cpu
