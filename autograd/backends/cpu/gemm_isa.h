#pragma once
// What each instruction-set file of the GEMM exports: its micro-kernels and their tile sizes.
#include <cstdint>

#include "gemm.h"

namespace stepformer::cpu::gemm_detail {

// run reads a packed panel of A; run_rows a row-major A in place (gemm_microkernel.h).
template <class T>
struct MicroKernel {
  const char* name;
  int mr, nr;
  void (*run)(std::int64_t k, const T* a, const T* b, T* c, std::int64_t rs_c, T alpha, T beta);
  void (*run_rows)(std::int64_t k, const T* a, std::int64_t lda, int m, const T* b, T* c, std::int64_t rs_c, T alpha,
                   T beta);
  // gemm_pack.h's pack_a and pack_b_panel in this instruction set's vectors (the same values), or null: those.
  void (*pack_a)(const MatrixView<const T>& a, std::int64_t i0, std::int64_t mc, std::int64_t k0, std::int64_t kc,
                 int mr, T* dst) = nullptr;
  void (*pack_b)(const MatrixView<const T>& b, std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t n,
                 int nr, T* dst) = nullptr;
};

// bfloat16 operands packed in pairs along k (one 32-bit word: k even in the low half, k odd in the high
// half, as vdpbf16ps pairs them), a float32 tile of C. `kp` counts pairs.
// run_rows reads A in place instead: a row-major bfloat16 A already holds its pairs side by side; row r of the
// tile starts at a + r * lda (rows from m on repeat row m - 1, whose results the caller drops).
struct MicroKernelBf16 {
  const char* name;
  int mr, nr;
  void (*run)(std::int64_t kp, const std::uint32_t* a, const std::uint32_t* b, float* c, std::int64_t rs_c, float alpha,
              float beta);
  void (*run_rows)(std::int64_t kp, const std::uint16_t* a, std::int64_t lda, int m, const std::uint32_t* b, float* c,
                   std::int64_t rs_c, float alpha, float beta);
  // gemm_pack.h's pack_a_pairs and pack_b_pairs in this instruction set's vectors: the same words.
  void (*pack_a)(const MatrixView<const bfloat16>& a, std::int64_t i0, std::int64_t mc, std::int64_t k0,
                 std::int64_t kc, int mr, std::uint32_t* dst);
  void (*pack_b)(const MatrixView<const bfloat16>& b, std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t n,
                 int nr, std::uint32_t* dst);
};

MicroKernel<float> avx512_f32();
MicroKernelBf16 avx512_bf16();  // AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4, Zen 5)
MicroKernel<double> avx512_f64();
MicroKernel<float> avx2_f32();
MicroKernel<double> avx2_f64();

}  // namespace stepformer::cpu::gemm_detail
