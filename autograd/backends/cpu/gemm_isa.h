#pragma once
// What each instruction-set file of the GEMM exports: its micro-kernels and their tile sizes.
#include <cstdint>

namespace stepformer::cpu::gemm_detail {

template <class T>
struct MicroKernel {
  const char* name;
  int mr, nr;
  void (*run)(std::int64_t k, const T* a, const T* b, T* c, std::int64_t rs_c, T alpha, T beta);
};

MicroKernel<float> avx512_f32();
MicroKernel<double> avx512_f64();
MicroKernel<float> avx2_f32();
MicroKernel<double> avx2_f64();

}  // namespace stepformer::cpu::gemm_detail
