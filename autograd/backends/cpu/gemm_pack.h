#pragma once
// Packing for the CPU GEMM (gemm.cpp): copying a block of A or B into the order its micro-kernel reads,
// zero-padded to whole panels. Packing is what makes any strides cheap: a transposed operand is read in its
// own order once, then every micro-kernel call streams unit-stride memory.
#include <algorithm>
#include <cstdint>

#include "autograd/bfloat16.h"
#include "gemm.h"

namespace stepformer::cpu::gemm_detail {

// B[k0:k0+kc, j0:j0+n] -> panels of nr columns, `ld` values apart (at least kc * nr): panel p holds, for each k,
// its nr values (zero past the n columns). A row-major B is read a row at a time for all of its panels: one
// straight from memory (a weight gradient's activations) then streams in order, where a panel at a time strode
// down it, 128 bytes from each row (docs/performance.md, "A row-major B, a row at a time").
template <class T, class TA>
inline void pack_b_panels(const MatrixView<const TA>& b, std::int64_t k0, std::int64_t kc, std::int64_t j0,
                          std::int64_t n, int nr, T* dst, std::int64_t ld) {
  const std::int64_t panels = (n + nr - 1) / nr;
  if (b.col_stride == 1) {
    for (std::int64_t k = 0; k < kc; ++k) {
      const TA* src = b.data + (k0 + k) * b.row_stride + j0;
      for (std::int64_t p = 0; p < panels; ++p) {
        T* row = dst + p * ld + k * nr;
        const std::int64_t here = std::min<std::int64_t>(nr, n - p * nr);
        std::int64_t j = 0;
        for (; j < here; ++j) row[j] = static_cast<T>(src[p * nr + j]);
        for (; j < nr; ++j) row[j] = T(0);
      }
    }
    return;
  }
  // A transposed or strided B: walk each column down its own stride.
  for (std::int64_t p = 0; p < panels; ++p, dst += ld)
    for (std::int64_t j = 0; j < nr; ++j) {
      if (p * nr + j >= n) {
        for (std::int64_t k = 0; k < kc; ++k) dst[k * nr + j] = T(0);
        continue;
      }
      const TA* src = b.data + k0 * b.row_stride + (j0 + p * nr + j) * b.col_stride;
      for (std::int64_t k = 0; k < kc; ++k) dst[k * nr + j] = static_cast<T>(src[k * b.row_stride]);
    }
}

// A[ic:ic+mc, pc:pc+kc] -> panels of mr rows: panel p holds, for each k, its mr values (zero past M).
template <class T, class TA>
inline void pack_a(const MatrixView<const TA>& a, std::int64_t i0, std::int64_t mc, std::int64_t k0, std::int64_t kc,
                   int mr, T* dst) {
  for (std::int64_t ip = 0; ip < mc; ip += mr, dst += kc * mr) {
    const std::int64_t m = std::min<std::int64_t>(mr, mc - ip);
    if (a.row_stride ==
        1) {  // column-major A (a transposed operand, as in dW = dY^T X): a panel's k-th column is contiguous
      for (std::int64_t k = 0; k < kc; ++k) {
        const TA* src = a.data + (i0 + ip) + (k0 + k) * a.col_stride;
        T* col = dst + k * mr;
        std::int64_t r = 0;
        for (; r < m; ++r) col[r] = static_cast<T>(src[r]);
        for (; r < mr; ++r) col[r] = T(0);
      }
      continue;
    }
    for (std::int64_t r = 0; r < mr; ++r) {  // row-major A: walk each row along k
      if (r >= m) {
        for (std::int64_t k = 0; k < kc; ++k) dst[k * mr + r] = T(0);
        continue;
      }
      const TA* src = a.data + (i0 + ip + r) * a.row_stride + k0 * a.col_stride;
      for (std::int64_t k = 0; k < kc; ++k) dst[k * mr + r] = static_cast<T>(src[k * a.col_stride]);
    }
  }
}

// bfloat16 operands for the vdpbf16ps kernel: pairs of k side by side in one 32-bit word (k even in the low
// half), zero past the edges and past an odd k. B: for each pair, nr columns' words; A: for each pair, mr rows'.
inline std::uint32_t pair_bits(const bfloat16* p, std::int64_t stride, bool second) {
  return std::uint32_t{p[0].bits} | (second ? std::uint32_t{p[stride].bits} << 16 : 0u);
}

inline void pack_b_pairs(const MatrixView<const bfloat16>& b, std::int64_t k0, std::int64_t kc, std::int64_t j0,
                         std::int64_t n, int nr, std::uint32_t* dst) {
  for (std::int64_t k = 0; k < kc; k += 2, dst += nr) {
    const bool second = k + 1 < kc;
    const bfloat16* src = b.data + (k0 + k) * b.row_stride + j0 * b.col_stride;
    std::int64_t j = 0;
    for (; j < n; ++j) dst[j] = pair_bits(src + j * b.col_stride, b.row_stride, second);
    for (; j < nr; ++j) dst[j] = 0;
  }
}

inline void pack_a_pairs(const MatrixView<const bfloat16>& a, std::int64_t i0, std::int64_t mc, std::int64_t k0,
                         std::int64_t kc, int mr, std::uint32_t* dst) {
  const std::int64_t kp = (kc + 1) / 2;
  for (std::int64_t ip = 0; ip < mc; ip += mr, dst += kp * mr) {
    const std::int64_t m = std::min<std::int64_t>(mr, mc - ip);
    if (a.row_stride == 1) {  // column-major A (dW = dY^T X): the panel's rows at one k are neighbours
      for (std::int64_t q = 0; q < kp; ++q) {
        const bfloat16* even = a.data + (i0 + ip) + (k0 + 2 * q) * a.col_stride;
        const bfloat16* odd = 2 * q + 1 < kc ? even + a.col_stride : nullptr;
        std::uint32_t* word = dst + q * mr;
        std::int64_t r = 0;
        for (; r < m; ++r) word[r] = std::uint32_t{even[r].bits} | (odd ? std::uint32_t{odd[r].bits} << 16 : 0u);
        for (; r < mr; ++r) word[r] = 0;
      }
      continue;
    }
    for (std::int64_t r = 0; r < mr; ++r) {
      if (r >= m) {
        for (std::int64_t q = 0; q < kp; ++q) dst[q * mr + r] = 0;
        continue;
      }
      const bfloat16* src = a.data + (i0 + ip + r) * a.row_stride + k0 * a.col_stride;
      for (std::int64_t q = 0; q < kp; ++q)
        dst[q * mr + r] = pair_bits(src + 2 * q * a.col_stride, a.col_stride, 2 * q + 1 < kc);
    }
  }
}

}  // namespace stepformer::cpu::gemm_detail
