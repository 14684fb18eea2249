// The AVX-512 micro-kernels (this file alone is compiled with -mavx512f; gemm.cpp calls it only on a CPU
// that has AVX-512F). float: 12 x 32 (24 of the 32 zmm registers accumulate); double: 12 x 16.
#include <immintrin.h>

#include "gemm_isa.h"
#include "gemm_microkernel.h"

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

}  // namespace

MicroKernel<float> avx512_f32() {
  return {"avx512", 14, 32, &micro_kernel<F32x16, 14, 2>, &micro_kernel_rows<F32x16, 14, 2>};
}
MicroKernel<double> avx512_f64() {
  return {"avx512", 12, 16, &micro_kernel<F64x8, 12, 2>, &micro_kernel_rows<F64x8, 12, 2>};
}

}  // namespace stepformer::cpu::gemm_detail
