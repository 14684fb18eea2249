// The AVX2 + FMA micro-kernels (this file alone is compiled with -mavx2 -mfma; gemm.cpp calls it only on
// a CPU that has both). float: 6 x 16 (12 of the 16 ymm registers accumulate); double: 6 x 8.
#include <immintrin.h>

#include "gemm_isa.h"
#include "gemm_microkernel.h"

namespace stepformer::cpu::gemm_detail {
namespace {

struct F32x8 {
  using T = float;
  using Reg = __m256;
  static constexpr int kLanes = 8;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const T* p) { return _mm256_loadu_ps(p); }
  static void store(T* p, Reg r) { _mm256_storeu_ps(p, r); }
  static Reg broadcast(T x) { return _mm256_set1_ps(x); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
};

struct F64x4 {
  using T = double;
  using Reg = __m256d;
  static constexpr int kLanes = 4;
  static Reg zero() { return _mm256_setzero_pd(); }
  static Reg load(const T* p) { return _mm256_loadu_pd(p); }
  static void store(T* p, Reg r) { _mm256_storeu_pd(p, r); }
  static Reg broadcast(T x) { return _mm256_set1_pd(x); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_pd(a, b, c); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_pd(a, b); }
};

}  // namespace

MicroKernel<float> avx2_f32() { return {"avx2", 6, 16, &micro_kernel<F32x8, 6, 2>, &micro_kernel_rows<F32x8, 6, 2>}; }
MicroKernel<double> avx2_f64() { return {"avx2", 6, 8, &micro_kernel<F64x4, 6, 2>, &micro_kernel_rows<F64x4, 6, 2>}; }

}  // namespace stepformer::cpu::gemm_detail
