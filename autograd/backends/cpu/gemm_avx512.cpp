// The AVX-512 micro-kernels (this file alone is compiled with -mavx512f; gemm.cpp calls it only on a CPU
// that has AVX-512F). float: 14 x 32 (28 of the 32 zmm registers accumulate); double: 12 x 16.
#include <immintrin.h>

#include "gemm_avx512_transpose.h"
#include "gemm_isa.h"
#include "gemm_microkernel.h"
#include "gemm_pack.h"

namespace stepformer::cpu::gemm_detail {
namespace {

struct F32x16 {
  using T = float;
  using Reg = __m512;
  static constexpr int kLanes = 16;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const T* p) { return _mm512_loadu_ps(p); }
  static void store(T* p, Reg r) { _mm512_storeu_ps(p, r); }
  static Reg broadcast(T x) { return _mm512_set1_ps(x); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
};

struct F64x8 {
  using T = double;
  using Reg = __m512d;
  static constexpr int kLanes = 8;
  static Reg zero() { return _mm512_setzero_pd(); }
  static Reg load(const T* p) { return _mm512_loadu_pd(p); }
  static void store(T* p, Reg r) { _mm512_storeu_pd(p, r); }
  static Reg broadcast(T x) { return _mm512_set1_pd(x); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_pd(a, b, c); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_pd(a, b); }
};

// float32 packing, the same values as gemm_pack.h's loops (the compiler leaves them scalar or 4 lanes wide; they
// were 13% of the language model's 1-thread float32 step, docs/performance.md). A row of B, or a column of a
// column-major A, is copied 16 lanes at a time; a transposed B or a row-major A, whose panel runs across lines,
// is transposed 16 x 16 at a time (gemm_avx512_transpose.h). Anything else takes the portable loop.
void transpose_floats(const float* line0, std::int64_t stride, std::int64_t lines, std::int64_t kc, std::int64_t ld,
                      float* dst, __mmask16 store) {
  static_assert(sizeof(float) == sizeof(std::uint32_t));
  transpose_lines(reinterpret_cast<const char*>(line0), stride * static_cast<std::int64_t>(sizeof(float)), lines, kc,
                  ld, reinterpret_cast<std::uint32_t*>(dst), store);
}

void pack_b_f32(const MatrixView<const float>& b, std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t n,
                int nr, float* dst, std::int64_t ld) {
  if (nr % 16 != 0) return pack_b_panels(b, k0, kc, j0, n, nr, dst, ld);
  const std::int64_t panels = (n + nr - 1) / nr;
  if (b.col_stride == 1) {  // a row at a time for all of the panels, as pack_b_panels does
    for (std::int64_t k = 0; k < kc; ++k) {
      const float* src = b.data + (k0 + k) * b.row_stride + j0;
      if (k + kPrefetchRows < kc) prefetch_span(src + kPrefetchRows * b.row_stride, n * 4);
      for (std::int64_t p = 0; p < panels; ++p)
        for (int j = 0; j < nr; j += 16)
          _mm512_storeu_ps(dst + p * ld + k * nr + j,
                           _mm512_maskz_loadu_ps(first_lanes(n - p * nr - j), src + p * nr + j));
    }
    return;
  }
  if (b.row_stride == 1) {
    for (std::int64_t p = 0; p < panels; ++p)
      for (int j = 0; j < nr; j += 16)
        transpose_floats(b.data + k0 + (j0 + p * nr + j) * b.col_stride, b.col_stride, n - p * nr - j, kc, nr,
                         dst + p * ld + j, 0xFFFF);
    return;
  }
  pack_b_panels(b, k0, kc, j0, n, nr, dst, ld);
}

void pack_a_f32(const MatrixView<const float>& a, std::int64_t i0, std::int64_t mc, std::int64_t k0, std::int64_t kc,
                int mr, float* dst) {
  const bool column_major = a.row_stride == 1, row_major = a.col_stride == 1;
  if (mr > 16 || !(column_major || row_major)) return pack_a(a, i0, mc, k0, kc, mr, dst);
  const __mmask16 store = first_lanes(mr);
  if (row_major) {
    for (std::int64_t ip = 0; ip < mc; ip += mr, dst += kc * mr)
      transpose_floats(a.data + (i0 + ip) * a.row_stride + k0, a.row_stride, std::min<std::int64_t>(mr, mc - ip), kc,
                       mr, dst, store);
    return;
  }
  // Column-major: the block's mc rows at one k are neighbours, read once for all of its panels.
  for (std::int64_t k = 0; k < kc; ++k) {
    const float* src = a.data + i0 + (k0 + k) * a.col_stride;
    if (k + kPrefetchRows < kc) prefetch_span(src + kPrefetchRows * a.col_stride, mc * 4);
    for (std::int64_t ip = 0; ip < mc; ip += mr)
      _mm512_mask_storeu_ps(dst + ip * kc + k * mr, store,
                            _mm512_maskz_loadu_ps(first_lanes(std::min<std::int64_t>(mr, mc - ip)), src + ip));
  }
}

}  // namespace

MicroKernel<float> avx512_f32() {
  return {"avx512", 14, 32, &micro_kernel<F32x16, 14, 2>, &micro_kernel_rows<F32x16, 14, 2>, &pack_a_f32, &pack_b_f32};
}
MicroKernel<double> avx512_f64() {
  return {"avx512", 12, 16, &micro_kernel<F64x8, 12, 2>, &micro_kernel_rows<F64x8, 12, 2>};
}

}  // namespace stepformer::cpu::gemm_detail
