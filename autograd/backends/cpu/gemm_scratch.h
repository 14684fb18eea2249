#pragma once
// The GEMM's per-thread scratch (gemm.cpp): its packing buffers, and bfloat16 blocks widened to float32 for the
// float32 kernel (the fallback where the CPU has no bfloat16 dot product).
#include <cstdint>

#include "aligned.h"
#include "autograd/bfloat16.h"
#include "rows.h"
#include "gemm.h"

namespace stepformer::cpu::gemm_detail {

// Growable 64-byte aligned scratch buffers, three per thread (0: packed B, 1: packed A, 2: a bfloat16 block widened
// before it is packed or read in place), kept between calls: the training loop multiplies the same shapes again and
// again, so after the first step packing allocates nothing.
template <class T>
inline T* scratch(std::size_t slot, std::size_t count) {
  thread_local AlignedBuffer<T> buffers[3];
  return buffers[slot].get(count);
}

// The block of x at rows [i0, i0 + m), columns [j0, j0 + n) widened to float32 (exactly) in this thread's scratch, laid
// out as x lies: a unit stride stays the unit stride, so the float32 kernel's packers and its in-place reading take
// the same paths on it as on a float32 operand, and the fallback's products are the float32 GEMM's, bit for bit.
inline MatrixView<const float> widened(const MatrixView<const bfloat16>& x, std::int64_t i0, std::int64_t m,
                                       std::int64_t j0, std::int64_t n) {
  float* const out = scratch<float>(2, static_cast<std::size_t>(m * n));
  const bfloat16* const at = x.data + i0 * x.row_stride + j0 * x.col_stride;
  if (x.col_stride == 1) {
    for (std::int64_t i = 0; i < m; ++i) widen_row_from_bf16(at + i * x.row_stride, out + i * n, n);
    return {out, n, 1};
  }
  if (x.row_stride == 1) {
    for (std::int64_t j = 0; j < n; ++j) widen_row_from_bf16(at + j * x.col_stride, out + j * m, m);
    return {out, 1, m};
  }
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) out[i * n + j] = static_cast<float>(at[i * x.row_stride + j * x.col_stride]);
  return {out, n, 1};
}
// An operand already of the kernel's type is its own block: no copy.
inline MatrixView<const float> widened(const MatrixView<const float>& x, std::int64_t i0, std::int64_t, std::int64_t j0,
                                       std::int64_t) {
  return {x.data + i0 * x.row_stride + j0 * x.col_stride, x.row_stride, x.col_stride};
}
inline MatrixView<const double> widened(const MatrixView<const double>& x, std::int64_t i0, std::int64_t,
                                        std::int64_t j0, std::int64_t) {
  return {x.data + i0 * x.row_stride + j0 * x.col_stride, x.row_stride, x.col_stride};
}

}  // namespace stepformer::cpu::gemm_detail
