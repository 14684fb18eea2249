#pragma once
// What each instruction-set file of the GEMM exports: its micro-kernels and their tile sizes.
#include <cstdint>
#include <vector>

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
  // gemm_pack.h's pack_a and pack_b_panels in this instruction set's vectors (the same values), or null: those.
  void (*pack_a)(const MatrixView<const T>& a, std::int64_t i0, std::int64_t mc, std::int64_t k0, std::int64_t kc,
                 int mr, T* dst) = nullptr;
  void (*pack_b)(const MatrixView<const T>& b, std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t n,
                 int nr, T* dst, std::int64_t ld) = nullptr;
};

// bfloat16 operands in pairs along k (one 32-bit word: k even in the low half, k odd in the high half, as
// vdpbf16ps and TDPBF16PS pair them), a float32 tile of C. `kp` counts pairs.
// - run reads A packed by pack_a, B packed by pack_b: the kernel's own layouts. The vdpbf16ps kernel's A holds, for
//   each pair, its mr rows' words (gemm_pack.h's pack_a_pairs); AMX's A holds each row's kp words (a tile row).
// - run_rows reads A in place instead: a row-major bfloat16 A already holds its pairs side by side; row r of the
//   tile starts at a + r * lda (rows from m on are not read: their results are the caller's to drop).
// - kp_multiple: how many pairs one step of the kernel takes. Packing pads kp with zero pairs to a multiple of it
//   (AMX: 16), and run_rows needs kp to be one (an A in place has no zeros to pad with).
// - begin, where not null, is called by each thread before its first run of a product (AMX: the tile
//   configuration).
// - mc: the rows of A one thread packs as a block (gemm.cpp's loops).
// - row_alignment: run_rows reads A in place only where its rows start at multiples of this many bytes, else A is
//   packed (AMX: 64; a tile row that straddles two cache lines loads at a third of the speed).
struct MicroKernelBf16 {
  const char* name;
  int mr, nr;
  void (*run)(std::int64_t kp, const std::uint32_t* a, const std::uint32_t* b, float* c, std::int64_t rs_c, float alpha,
              float beta);
  void (*run_rows)(std::int64_t kp, const std::uint16_t* a, std::int64_t lda, int m, const std::uint32_t* b, float* c,
                   std::int64_t rs_c, float alpha, float beta);
  void (*pack_a)(const MatrixView<const bfloat16>& a, std::int64_t i0, std::int64_t mc, std::int64_t k0,
                 std::int64_t kc, int mr, std::uint32_t* dst);
  void (*pack_b)(const MatrixView<const bfloat16>& b, std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t n,
                 int nr, std::uint32_t* dst);
  int kp_multiple = 1;
  std::int64_t mc = 98;
  void (*begin)() = nullptr;
  int row_alignment = 1;
};

MicroKernel<float> avx512_f32();
MicroKernelBf16 avx512_bf16();  // AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4, Zen 5)
MicroKernelBf16 amx_bf16();     // AMX-TILE and AMX-BF16 (Sapphire Rapids and later Xeons), after amx_granted()
bool amx_granted();             // asks Linux for the tile state (once per process): true if granted
// The bfloat16 dot-product kernels this CPU can run, fastest last (gemm.h's bf16_dot_kernels() names them);
// gemm<float, bfloat16> multiplies with the last when none is named.
const std::vector<MicroKernelBf16>& bf16_dots();
// The one named `name` (null: the fastest), or null where there is none; a name this CPU cannot run throws.
const MicroKernelBf16* bf16_dot(const char* name = nullptr);
MicroKernel<double> avx512_f64();
MicroKernel<float> avx2_f32();
MicroKernel<double> avx2_f64();

}  // namespace stepformer::cpu::gemm_detail
