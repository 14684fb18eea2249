// The bfloat16 micro-kernel on AMX, Intel's Advanced Matrix Extensions (Sapphire Rapids and later Xeons; this file
// alone is compiled with -mamx-tile -mamx-bf16, and gemm.cpp calls it only on a CPU that has them and once Linux
// has granted the process their state). AMX adds eight tile registers of up to 16 rows of 64 bytes beside the
// vector registers, and TDPBF16PS (_tile_dpbf16ps), which adds to a 16 x 16 float32 tile C the product of a
// 16 x 32 bfloat16 tile A and a 32 x 16 bfloat16 tile B:
//
//   C[i][j] += sum over p < 16 of  A[i][2p] B[2p][j] + A[i][2p + 1] B[2p + 1][j]
//
// 8,192 multiply-adds in one instruction, where vdpbf16ps does 32. B's tile holds pairs of k side by side in each
// 32-bit word, 16 columns to a row (Intel calls it the VNNI layout): exactly the words of gemm_pack.h's
// pack_b_pairs, so a B panel of 32 columns is two tiles side by side, 128 bytes a row. A's tile is 16 rows of 16
// pairs as they lie in a row-major bfloat16 A, which is why a row-major A is read in place.
//
// The tile of C is 32 x 32, four accumulator tiles (2 x 2); the other four registers hold two tiles of A (rows
// 0-15 and 16-31) and two of B (columns 0-15 and 16-31), each used twice per load. k advances 16 pairs (32 values)
// per step, so A and B are padded with zero pairs to a multiple of 16 (kp_multiple). Intel's definition (SDM,
// TDPBF16PS) treats denormal inputs as zero and flushes denormal results, as vdpbf16ps does; the products of
// bfloat16 values are exact in float32, so the results differ from the other kernels' only in the order of the
// additions and in those flushes.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "aligned.h"
#include "gemm_avx512_transpose.h"
#include "gemm_bf16_pairs.h"
#include "gemm_isa.h"
#include "gemm_pack.h"

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace stepformer::cpu::gemm_detail {
namespace {

constexpr int kMr = 32, kNr = 32;  // the tile of C
constexpr int kStep = 16;          // pairs of k per tile step: 16 words (64 bytes) in a row of an A tile

// The layout LDTILECFG reads (SDM, "Tile configuration"): palette 1 (eight tiles of up to 16 rows x 64 bytes),
// and each tile's rows and bytes per row. Ours: every tile 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  std::uint8_t palette, start_row;
  std::uint8_t reserved[14];
  std::uint16_t bytes_per_row[16];
  std::uint8_t rows[16];
};

TileConfig our_config() {
  TileConfig config{};
  config.palette = 1;
  for (int t = 0; t < 8; ++t) config.rows[t] = 16, config.bytes_per_row[t] = 64;
  return config;
}

// Each thread loads the configuration before its first tile instruction of a product. Loading it costs 130-150 ns
// and reading the one in place 11-15 ns (a 2-core Sapphire Rapids-class Xeon; docs/performance.md), and
// attention makes a product per tile of keys, so a thread loads it only when it is not already the one in place:
// something else (oneDNN, in gemm_bench) may have loaded another or released the tiles (palette 0) in between.
// It is never released: a thread keeps its 8 KB of tile state until it ends, which costs only a larger save when
// the kernel switches it out.
void configure_tiles() {
  static const TileConfig ours = our_config();
  TileConfig now;
  _tile_storeconfig(&now);
  if (std::memcmp(&now, &ours, sizeof ours) != 0) _tile_loadconfig(&ours);
}

// C[32 x 32] = alpha * A B + beta * C. A: 32 rows of kp pairs, row r at a + r * lda bytes; B: kp rows of 32
// columns' pairs, 128 bytes a row (two tiles side by side). kp is a multiple of 16. Where alpha is 1 and beta 0
// or 1 (most products: a fresh product, or a gradient added to), C itself is the accumulators' first and last
// value; otherwise they go through a buffer. beta == 0 never reads C.
void tile_kernel(std::int64_t kp, const char* a, std::int64_t lda, const std::uint32_t* b, float* c, std::int64_t rs_c,
                 float alpha, float beta) {
  const std::int64_t ldc = rs_c * static_cast<std::int64_t>(sizeof(float));
  const bool direct = alpha == 1 && (beta == 0 || beta == 1);
  if (direct && beta == 1) {
    _tile_loadd(0, c, ldc);
    _tile_loadd(1, c + 16, ldc);
    _tile_loadd(2, c + 16 * rs_c, ldc);
    _tile_loadd(3, c + 16 * rs_c + 16, ldc);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (std::int64_t q = 0; q < kp; q += kStep) {
    const char* aq = a + q * 4;
    const std::uint32_t* bq = b + q * kNr;
    _tile_loadd(4, aq, lda);
    _tile_loadd(5, aq + 16 * lda, lda);
    _tile_loadd(6, bq, kNr * 4);
    _tile_loadd(7, bq + 16, kNr * 4);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  if (direct) {
    _tile_stored(0, c, ldc);
    _tile_stored(1, c + 16, ldc);
    _tile_stored(2, c + 16 * rs_c, ldc);
    _tile_stored(3, c + 16 * rs_c + 16, ldc);
    return;
  }
  alignas(64) float tile[kMr * kNr];
  _tile_stored(0, tile, kNr * 4);
  _tile_stored(1, tile + 16, kNr * 4);
  _tile_stored(2, tile + 16 * kNr, kNr * 4);
  _tile_stored(3, tile + 16 * kNr + 16, kNr * 4);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int r = 0; r < kMr; ++r)
    for (int v = 0; v < kNr; v += 16) {
      float* p = c + r * rs_c + v;
      const __m512 scaled = _mm512_mul_ps(_mm512_load_ps(tile + r * kNr + v), va);
      _mm512_storeu_ps(p, beta == 0 ? scaled : _mm512_fmadd_ps(_mm512_loadu_ps(p), vb, scaled));
    }
}

// A packed panel: 32 rows of kp words, row r at a + r * kp (pack_a_rows below).
void amx_kernel(std::int64_t kp, const std::uint32_t* a, const std::uint32_t* b, float* c, std::int64_t rs_c,
                float alpha, float beta) {
  tile_kernel(kp, reinterpret_cast<const char*>(a), kp * 4, b, c, rs_c, alpha, beta);
}

// A row-major A read in place, row r at a + r * lda values. A tile load reads 16 whole rows, so a panel of fewer
// than 32 rows (M's edge) is copied into a zeroed one first: a row past M may lie past the end of A.
void amx_kernel_rows(std::int64_t kp, const std::uint16_t* a, std::int64_t lda, int m, const std::uint32_t* b, float* c,
                     std::int64_t rs_c, float alpha, float beta) {
  if (m == kMr) return tile_kernel(kp, reinterpret_cast<const char*>(a), lda * 2, b, c, rs_c, alpha, beta);
  thread_local AlignedBuffer<std::uint32_t> buffer;
  const std::int64_t words = kMr * kp;
  std::uint32_t* const rows = buffer.get(static_cast<std::size_t>(words));
  std::memset(rows, 0, static_cast<std::size_t>(words) * 4);
  for (int r = 0; r < m; ++r) std::memcpy(rows + r * kp, a + r * lda, static_cast<std::size_t>(kp) * 4);
  tile_kernel(kp, reinterpret_cast<const char*>(rows), kp * 4, b, c, rs_c, alpha, beta);
}

std::int64_t padded_pairs(std::int64_t kc) { return ((kc + 1) / 2 + kStep - 1) / kStep * kStep; }

// B: pack_b_pairs' words (the vdpbf16ps kernel's packing in AVX-512, the same words), then zero pair rows up to a
// multiple of 16.
void pack_b_tiles(const MatrixView<const bfloat16>& b, std::int64_t k0, std::int64_t kc, std::int64_t j0,
                  std::int64_t n, int nr, std::uint32_t* dst) {
  static const MicroKernelBf16 pairs = avx512_bf16();
  pairs.pack_b(b, k0, kc, j0, n, nr, dst);
  const std::int64_t kp = (kc + 1) / 2;
  std::memset(dst + kp * nr, 0, static_cast<std::size_t>((padded_pairs(kc) - kp) * nr) * 4);
}

// A[i0:i0+mc, k0:k0+kc] -> panels of 32 rows, each row its kp (padded) pairs: row r of panel p at
// dst + (p * 32 + r) * kp. Zero past M, past K and in an odd K's last high half.
// - row-major A: each row's values are its pairs already; copied.
// - column-major A (a transposed operand, as in dW = X^T dY): one pair of k of 16 neighbouring rows is two runs of
//   16 values a column apart, interleaved into 16 words (the vdpbf16ps kernel's packing does the same); 16 such
//   pairs are a 16 x 16 block of words, which turned over (gemm_avx512_transpose.h) gives 16 rows' 16 pairs.
// - other strides: the plain loop.
void pack_a_rows(const MatrixView<const bfloat16>& a, std::int64_t i0, std::int64_t mc, std::int64_t k0,
                 std::int64_t kc, int mr, std::uint32_t* dst) {
  const std::int64_t kp = padded_pairs(kc), full = kc / 2;
  for (std::int64_t ip = 0; ip < mc; ip += mr, dst += mr * kp) {
    const std::int64_t m = std::min<std::int64_t>(mr, mc - ip);
    if (a.col_stride == 1) {
      for (std::int64_t r = 0; r < mr; ++r) {
        std::uint32_t* row = dst + r * kp;
        if (r >= m) {
          std::memset(row, 0, static_cast<std::size_t>(kp) * 4);
          continue;
        }
        const std::uint16_t* src = bits(a.data + (i0 + ip + r) * a.row_stride + k0);
        std::memcpy(row, src, static_cast<std::size_t>(full) * 4);
        std::int64_t q = full;
        if (kc % 2) row[q++] = src[kc - 1];
        std::memset(row + q, 0, static_cast<std::size_t>(kp - q) * 4);
      }
    } else if (a.row_stride == 1) {
      for (std::int64_t g = 0; g < mr; g += 16) {
        const __mmask16 lanes = first_lanes(m - g);
        for (std::int64_t q0 = 0; q0 < kp; q0 += 16) {
          __m512i words[16];
          for (int j = 0; j < 16; ++j) {
            const std::int64_t q = q0 + j;
            if (lanes == 0 || 2 * q >= kc) {
              words[j] = _mm512_setzero_si512();
              continue;
            }
            const std::uint16_t* even = bits(a.data + i0 + ip + g + (k0 + 2 * q) * a.col_stride);
            words[j] = interleave(lanes, even, 2 * q + 1 < kc ? even + a.col_stride : nullptr);
          }
          transpose16(words);
          for (int r = 0; r < 16; ++r) _mm512_storeu_si512(dst + (g + r) * kp + q0, words[r]);
        }
      }
    } else {
      for (std::int64_t r = 0; r < mr; ++r)
        for (std::int64_t q = 0; q < kp; ++q) {
          const bool inside = r < m && 2 * q < kc;
          dst[r * kp + q] = inside ? pair_bits(a.data + (i0 + ip + r) * a.row_stride + (k0 + 2 * q) * a.col_stride,
                                               a.col_stride, 2 * q + 1 < kc)
                                   : 0u;
        }
    }
  }
}

}  // namespace

bool amx_granted() {
#if defined(__linux__)
  // Linux enables AMX's 8 KB of tile state per process on request (arch_prctl(2), Documentation/arch/x86/xstate.rst);
  // without it the first tile instruction kills the process (SIGILL).
  constexpr int kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

MicroKernelBf16 amx_bf16() {
  MicroKernelBf16 k{"amx_bf16", kMr, kNr, &amx_kernel, &amx_kernel_rows, &pack_a_rows, &pack_b_tiles};
  k.kp_multiple = kStep;
  k.mc = 256;
  k.begin = &configure_tiles;
  k.row_alignment = 64;
  return k;
}

}  // namespace stepformer::cpu::gemm_detail
