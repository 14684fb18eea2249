// The CPU GEMM, blocked the way GotoBLAS and BLIS block it (Goto & van de Geijn, "Anatomy of
// high-performance matrix multiplication", 2008; Van Zee & van de Geijn, "BLIS", 2015). Five loops
// around a micro-kernel, each sized so that the data it reuses stays in one level of the memory
// hierarchy:
//
//   for jc in N by nc:              a kc x nc block of B, packed once, is shared by all threads (L3)
//     for pc in K by kc:
//       pack B[pc:pc+kc, jc:jc+nc] into nr-wide column panels (a row-major B a row at a time)
//       for ic in M by mc:          each thread packs its own mc x kc block of A (L2)
//         pack A[ic:ic+mc, pc:pc+kc] into mr-tall row panels
//         for jr in nc by nr:       one kc x nr panel of B (L1) is reused by every row panel of A
//           for ir in mc by mr:
//             micro-kernel: C[ir:ir+mr, jr:jr+nr] += A panel @ B panel, in registers
//
// Packing is what makes any strides cheap: a transposed operand is read in its own order once, then
// every micro-kernel streams unit-stride, zero-padded panels. It also arranges bfloat16 operands (TA) for
// their kernel: pairs of k side by side, on a CPU with AMX for TDPBF16PS on tiles (gemm_amx.cpp) and on one with
// AVX512_BF16 for vdpbf16ps (gemm_avx512bf16.cpp); elsewhere, or when a float32 kernel is named, widened to float32
// a block at a time and then packed, or read in place, as a float32 operand would be (the fallback: the float32
// product of the same values, half the memory read from A and B). Tiles at the edges of
// C (fewer than nr columns, or fewer than mr rows of a packed panel) and C with non-unit column stride go through a
// small buffer.
#include "gemm.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "aligned.h"
#include "rows.h"
#include "cpu_backend.h"
#include "gemm_isa.h"
#include "gemm_microkernel.h"
#include "gemm_pack.h"
#include "gemm_scratch.h"
#include "gemm_team.h"
#include "gemm_thin.h"
#include "strided.h"
#include "vmath.h"

namespace stepformer::cpu {

namespace {

using gemm_detail::on_team, gemm_detail::scratch, gemm_detail::static_share, gemm_detail::team_barrier,
    gemm_detail::team_size, gemm_detail::widened;

template <class T>
void scale(std::int64_t M, std::int64_t N, T beta, MatrixView<T> c) {
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      T& x = c.data[i * c.row_stride + j * c.col_stride];
      x = beta == 0 ? T(0) : beta * x;
    }
}

}  // namespace

// Equal blocks rounded up to mr rows would not do: for M = 1024, mr = 14, mc = 98 on two threads they
// made 11 blocks of 98 rows, 588 rows for one thread and 436 for the other.
RowBlocks::RowBlocks(std::int64_t M_, int mr_, std::int64_t mc, int threads)
    : M(M_), panels((M_ + mr_ - 1) / mr_), count((M_ + mc - 1) / mc), mr(mr_) {
  if (threads > 1 && panels >= threads) count = (count + threads - 1) / threads * threads;
  count = std::max<std::int64_t>(1, std::min(count, panels));
}
std::int64_t RowBlocks::start(std::int64_t block) const { return std::min(M, block * panels / count * mr); }
std::int64_t RowBlocks::max_rows() const { return (panels + count - 1) / count * mr; }

namespace {

// An edge tile, computed whole into `tile` (row stride nr): write back the m x n part that exists, in C's type TC
// (T itself, or bfloat16 rounded once from T).
template <class T, class TC>
void write_edge(const T* tile, int nr, std::int64_t m, std::int64_t n, T alpha, T beta, TC* c, std::int64_t rs,
                std::int64_t cs) {
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t q = 0; q < n; ++q) {
      TC& x = c[r * rs + q * cs];
      x = TC(alpha * tile[r * nr + q] + (beta == 0 ? T(0) : beta * static_cast<T>(x)));
    }
}

// The largest tile of C a micro-kernel computes (AMX's 32 x 32; the others' fit too), for the buffers of edge tiles
// and of tiles stored in bfloat16.
constexpr int kMaxTile = 32 * 32;

// bfloat16 k blocks, in values (pairs are half as many): a pair row of a B panel is as long as a float32 row,
// so 2048 values take the bytes of the float32 AVX-512 kernel's 1024.
constexpr std::int64_t kBf16Kc = 2048;

// The five loops of the top of this file, for any packing: P is what a packed element holds (a value of T,
// or a pair of bfloat16 values), `per` how many k one element covers (1 or 2), and `step` how many elements the
// kernel takes at once (packing pads a panel's elements with zeros to a multiple of it: AMX's 16 pairs).
struct Blocking {
  int mr, nr, per, step;
  std::int64_t mc, kc, nc;
  std::int64_t packed(std::int64_t kc_here) const { return ((kc_here + per - 1) / per + step - 1) / step * step; }
};

// Each thread calls begin() once before its first micro-kernel (AMX configures its tiles there).
constexpr auto kNothingToBegin = [] {};

// C's type TC is T, or bfloat16 (K in one k block: the tiles are rounded as they are stored, by run()); run() takes
// a tile of either type. pack_b(k0, kc, j0, n, dst, ld, thread, team) packs this thread's share of B's columns
// [j0, j0 + n) into nr-wide panels `ld` elements apart (gemm_rows_in_place's too).
template <class T, class P, class TC, class PackA, class PackB, class Run, class Begin>
void blocked_gemm(std::int64_t M, std::int64_t N, std::int64_t K, T alpha, T beta, MatrixView<TC> c, int threads,
                  const Blocking& kn, PackA pack_a, PackB pack_b, Run run, Begin begin) {
  const int mr = kn.mr, nr = kn.nr;
  threads = team_size(M, N, K, threads);
  const std::int64_t nc_max = std::min(kn.nc, (N + nr - 1) / nr * nr);
  const std::int64_t kp_max = kn.packed(std::min(kn.kc, K));  // packed k: values or pairs
  P* const packed_b = scratch<P>(0, static_cast<std::size_t>(nc_max * kp_max));

  // A few row panels with many column panels (a weight gradient of 64 rows: 5 panels against 8) are split by
  // columns: split by rows, each thread read every packed B panel for its 2 or 3 row panels, and two threads ran
  // the product no faster than one (docs/performance.md, "Packing asks ahead").
  const bool by_columns = (M + mr - 1) / mr < 4 * threads && nc_max / nr >= 2 * threads;
  const RowBlocks rows(M, mr, kn.mc, by_columns ? 1 : threads);
  const std::int64_t blocks = rows.count;

  on_team(threads, [&](int thread, int team) {
    begin();
    // When there are fewer blocks than threads (a short M, as in decoding), each block's column panels
    // are split into groups so that every thread still has work.
    const std::int64_t groups_wanted = (team + blocks - 1) / blocks;
    for (std::int64_t jc = 0; jc < N; jc += kn.nc) {
      const std::int64_t nc = std::min(kn.nc, N - jc), panels = (nc + nr - 1) / nr;
      for (std::int64_t pc = 0; pc < K; pc += kn.kc) {
        const std::int64_t kc = std::min(kn.kc, K - pc), kp = kn.packed(kc);
        const T beta_here = pc == 0 ? beta : T(1);  // later k blocks add to what the first wrote
        const std::int64_t groups = std::min(panels, groups_wanted);
        pack_b(pc, kc, jc, nc, packed_b, kp * nr, thread, team);
        team_barrier(team);  // every panel of B packed before any is read

        std::int64_t packed_block = -1;
        for (auto [w, end] = static_share(blocks * groups, thread, team); w < end; ++w) {
          const std::int64_t block = w / groups, g = w % groups;
          const std::int64_t ic = rows.start(block), mc = rows.start(block + 1) - ic;
          P* const packed_a = scratch<P>(1, static_cast<std::size_t>(rows.max_rows() * kp_max));
          if (block != packed_block) pack_a(ic, mc, pc, kc, packed_a), packed_block = block;
          for (std::int64_t p = g * panels / groups; p < (g + 1) * panels / groups; ++p) {
            const std::int64_t j = jc + p * nr, n = std::min<std::int64_t>(nr, N - j);
            for (std::int64_t ip = 0; ip < mc; ip += mr) {
              const std::int64_t m = std::min<std::int64_t>(mr, mc - ip);
              TC* const cij = c.data + (ic + ip) * c.row_stride + j * c.col_stride;
              const P* const ap = packed_a + ip * kp;
              const P* const bp = packed_b + p * kp * nr;
              if (m == mr && n == nr && c.col_stride == 1) {
                run(kp, ap, bp, cij, c.row_stride, alpha, beta_here);
              } else {  // an edge tile: compute the full tile into a buffer, write back what exists
                alignas(64) T tile[kMaxTile];
                run(kp, ap, bp, tile, nr, T(1), T(0));
                write_edge(tile, nr, m, n, alpha, beta_here, cij, c.row_stride, c.col_stride);
              }
            }
          }
        }
        team_barrier(team);  // every panel of B read before the next k block is packed over it
      }
    }
  });
}

// A row-major A read in place, only B packed, as oneDNN does: threads split A's row panels. It pays where packing
// A costs about as much as the products each of its values feeds: a thin N (attention's weights @ V: N = 64), and a
// K short enough that a row panel of A (mr rows of K: 28 KB for 14 rows of 1024 bfloat16 or 512 float32 values)
// stays in a 32 KB L1 while every B panel streams past it (the language model's K = 256; docs/performance.md,
// "A short K reads A in place", measures both). A bfloat16 A needs an even K: its pairs of k then already sit side
// by side, as vdpbf16ps takes them. `per` is how many k one packed element of B covers (1, or 2 for pairs);
// row(i, k0) points at A's row i from k0; run(kp, row, m, b, c, rs_c, alpha, beta) is the in-place micro-kernel, which
// stores only its m rows where `short_rows_in_place` (the float32 kernels: a short last row panel then needs no
// buffer; the bfloat16 dot kernels store whole tiles).
// A wide B is packed and multiplied kInPlaceBBytes (gemm.h) of packed panels at a time, which stay in L3 (32 MB on
// Zen 3, 4 and 5) while every row panel reads them: packed whole, the base model's output layer (37,000 columns,
// 38 MB) came from memory once per row panel, at 0.87x oneDNN (docs/performance.md). A B that fits is packed whole:
// 256 KB blocks (for L2) cost products whose B fits in L3 a few percent in barriers and reread rows of A.

template <class T, class P, bool short_rows_in_place, class TC, class PackB, class Row, class Run, class Begin>
void gemm_rows_in_place(std::int64_t M, std::int64_t N, std::int64_t K, T alpha, T beta, MatrixView<TC> c, int threads,
                        int mr, int nr, int per, std::int64_t kc_max, PackB pack_b, Row row, Run run, Begin begin) {
  threads = team_size(M, N, K, threads);
  const std::int64_t panels = (N + nr - 1) / nr, row_panels = (M + mr - 1) / mr;
  const std::int64_t kp_max = (std::min(kc_max, K) + per - 1) / per;
  const std::int64_t block_panels =
      std::clamp<std::int64_t>(kInPlaceBBytes / (kp_max * nr * static_cast<std::int64_t>(sizeof(P))), 1, panels);
  P* const packed_b = scratch<P>(0, static_cast<std::size_t>(block_panels * nr * kp_max));
  on_team(threads, [&](int thread, int team) {
    for (std::int64_t pc = 0; pc < K; pc += kc_max) {
      if (pc == 0) begin();
      const std::int64_t kc = std::min(kc_max, K - pc), kp = (kc + per - 1) / per;
      const T beta_here = pc == 0 ? beta : T(1);
      for (std::int64_t p0 = 0; p0 < panels; p0 += block_panels) {
        const std::int64_t p1 = std::min(panels, p0 + block_panels);
        pack_b(pc, kc, p0 * nr, std::min(N, p1 * nr) - p0 * nr, packed_b, kp * nr, thread, team);
        team_barrier(team);  // this block of B packed before any of it is read
        for (auto [ip, end] = static_share(row_panels, thread, team); ip < end; ++ip) {
          const std::int64_t i = ip * mr;
          const int m = static_cast<int>(std::min<std::int64_t>(mr, M - i));
          const auto ai = row(i, pc);
          for (std::int64_t p = p0; p < p1; ++p) {
            const std::int64_t j = p * nr, n = std::min<std::int64_t>(nr, N - j);
            TC* const cij = c.data + i * c.row_stride + j * c.col_stride;
            const P* const bp = packed_b + (p - p0) * kp * nr;
            if ((m == mr || short_rows_in_place) && n == nr && c.col_stride == 1) {
              run(kp, ai, m, bp, cij, c.row_stride, alpha, beta_here);
            } else {
              alignas(64) T tile[kMaxTile];
              run(kp, ai, m, bp, tile, nr, T(1), T(0));
              write_edge(tile, nr, m, n, alpha, beta_here, cij, c.row_stride, c.col_stride);
            }
          }
        }
        team_barrier(team);  // this block of B read by every row panel before the next is packed over it
      }
    }
  });
}

// Whether to read A in place: a thin N, or a row panel of A within kInPlacePanelBytes while A has a row panel for
// every thread (the blocked loop also splits N among them).
constexpr std::int64_t kInPlacePanelBytes = 28 << 10;
template <class TA>
bool in_place_pays(std::int64_t M, std::int64_t N, std::int64_t K, int threads, int mr, int nr) {
  const std::int64_t max_k = kInPlacePanelBytes / (mr * static_cast<std::int64_t>(sizeof(TA)));
  return N <= 2 * nr || (K <= max_k && (M + mr - 1) / mr >= team_size(M, N, K, threads));
}

// Whether the bfloat16 product reads a row-major A in place: where it pays, every k block is whole steps of the
// kernel (K a multiple of 2 * kp_multiple values) and every row starts aligned as the kernel needs.
bool dot_reads_a_in_place(const gemm_detail::MicroKernelBf16& dot, std::int64_t M, std::int64_t N, std::int64_t K,
                          const MatrixView<const bfloat16>& a, int threads) {
  const std::uint64_t align = static_cast<std::uint64_t>(dot.row_alignment);
  const bool rows_aligned = reinterpret_cast<std::uintptr_t>(a.data) % align == 0 &&
                            static_cast<std::uint64_t>(a.row_stride * 2) % align == 0;
  return a.col_stride == 1 && K % (2 * dot.kp_multiple) == 0 && rows_aligned &&
         in_place_pays<bfloat16>(M, N, K, threads, dot.mr, dot.nr);
}

// One full tile of C from kernel(c, rs_c, alpha, beta): into C itself where C is float32; where C is bfloat16, into a
// float32 tile in L1, then scaled and rounded once as it is stored, so the product never reaches memory in float32.
template <class Kernel>
void store_tile(int, int, float* c, std::int64_t rs, float alpha, float beta, Kernel kernel) {
  kernel(c, rs, alpha, beta);
}
template <class Kernel>
void store_tile(int mr, int nr, bfloat16* c, std::int64_t rs, float alpha, float beta, Kernel kernel) {
  alignas(64) float tile[kMaxTile];
  kernel(tile, nr, 1.f, 0.f);
  for (int r = 0; r < mr; ++r) {
    float* const row = tile + r * nr;
    bfloat16* const out = c + r * rs;
    if (beta != 0)
      for (int q = 0; q < nr; ++q) row[q] = alpha * row[q] + beta * static_cast<float>(out[q]);
    else if (alpha != 1)
      for (int q = 0; q < nr; ++q) row[q] *= alpha;
    round_row_to_bf16(row, out, nr);
  }
}

// C = alpha A B + beta C on a bfloat16 dot kernel, C in float32 or, where K is one k block, in bfloat16.
template <class TC>
void dot_gemm(const gemm_detail::MicroKernelBf16& dot, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
              const MatrixView<const bfloat16>& a, const MatrixView<const bfloat16>& b, float beta, MatrixView<TC> c,
              int threads) {
  const auto begin = [&dot] {
    if (dot.begin) dot.begin();
  };
  const auto pack_b = [&](std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t n, std::uint32_t* dst,
                          std::int64_t ld, int thread, int team) {  // by panels, one a call
    for (auto [p, end] = static_share((n + dot.nr - 1) / dot.nr, thread, team); p < end; ++p)
      dot.pack_b(b, k0, kc, j0 + p * dot.nr, std::min<std::int64_t>(dot.nr, n - p * dot.nr), dot.nr, dst + p * ld);
  };
  if (dot_reads_a_in_place(dot, M, N, K, a, threads))
    return gemm_rows_in_place<float, std::uint32_t, false>(
        M, N, K, alpha, beta, c, threads, dot.mr, dot.nr, 2, kBf16Kc, pack_b,
        [&](std::int64_t i, std::int64_t k0) { return &a.data[i * a.row_stride + k0].bits; },
        [&](std::int64_t kp, const std::uint16_t* ai, int m, const std::uint32_t* bp, auto* cij, std::int64_t rs,
            float al, float be) {
          store_tile(dot.mr, dot.nr, cij, rs, al, be, [&](float* t, std::int64_t trs, float ta, float tb) {
            dot.run_rows(kp, ai, a.row_stride, m, bp, t, trs, ta, tb);
          });
        },
        begin);
  const Blocking blocking{dot.mr, dot.nr, 2, dot.kp_multiple, dot.mc, kBf16Kc, 2048};
  blocked_gemm<float, std::uint32_t>(
      M, N, K, alpha, beta, c, threads, blocking,
      [&](std::int64_t i0, std::int64_t mc, std::int64_t k0, std::int64_t kc, std::uint32_t* dst) {
        dot.pack_a(a, i0, mc, k0, kc, dot.mr, dst);
      },
      pack_b,
      [&](std::int64_t kp, const std::uint32_t* ap, const std::uint32_t* bp, auto* cij, std::int64_t rs, float al,
          float be) {
        store_tile(dot.mr, dot.nr, cij, rs, al, be,
                   [&](float* t, std::int64_t trs, float ta, float tb) { dot.run(kp, ap, bp, t, trs, ta, tb); });
      },
      begin);
}

}  // namespace

template <class T, class TA>
void gemm(std::int64_t M, std::int64_t N, std::int64_t K, T alpha, MatrixView<const TA> a, MatrixView<const TA> b,
          T beta, MatrixView<T> c, int threads, const GemmKernel<T>* kernel, const char* dot_kernel) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0) return scale(M, N, beta, c);
  if (!kernel && !dot_kernel && M <= kThinRows)
    return thin_gemm(M, N, K, alpha, a, b, beta, c, team_size(M, N, K, threads));
  if constexpr (std::is_same_v<TA, bfloat16>) {
    if (const gemm_detail::MicroKernelBf16* dot = kernel ? nullptr : gemm_detail::bf16_dot(dot_kernel)) {
      // Attention's per-head products too: reading A in place leaves too little overhead for the direct loop.
      const bool small = N <= kSmallN && M * N * K <= kSmallWork;
      if (!dot_kernel && small && !dot_reads_a_in_place(*dot, M, N, K, a, threads))
        return small_gemm(M, N, K, alpha, a, b, beta, c);
      return dot_gemm(*dot, M, N, K, alpha, a, b, beta, c, threads);
    }
  }
  const GemmKernel<T>& kn = kernel ? *kernel : gemm_kernels<T>().back();
  // From here a bfloat16 operand (the fallback, without a dot kernel) is widened block by block as it is packed or
  // read (widened(), gemm_scratch.h): the float32 kernel then runs the float32 product's paths on the same values.
  // The direct loop vectorises along a row of B: a small product with a transposed B (attention's q k^T) and a
  // row-major A is read in place with B packed instead.
  const bool small = N <= kSmallN && M * N * K <= kSmallWork;
  const bool direct = b.col_stride == 1 || a.col_stride != 1;
  if (!kernel && small && direct) return small_gemm(M, N, K, alpha, a, b, beta, c);
  const int nr = kn.nr;
  const auto pack = [&](std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t n, T* dst, std::int64_t ld) {
    const MatrixView<const T> block = widened(b, k0, kc, j0, n);
    kn.pack_b ? kn.pack_b(block, 0, kc, 0, n, nr, dst, ld)
              : gemm_detail::pack_b_panels(block, 0, kc, 0, n, nr, dst, ld);
  };
  // This thread's share: a row-major float32 B by rows, so that each thread streams whole rows (docs/performance.md,
  // "A row-major B, a row at a time"); otherwise a panel a call (a bfloat16 B's widened copy then stays in L2).
  const auto pack_b = [&](std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t n, T* dst, std::int64_t ld,
                          int thread, int team) {
    if (std::is_same_v<TA, T> && b.col_stride == 1) {
      const auto [k, end] = static_share(kc, thread, team);
      return pack(k0 + k, end - k, j0, n, dst + k * nr, ld);
    }
    for (auto [p, end] = static_share((n + nr - 1) / nr, thread, team); p < end; ++p)
      pack(k0, kc, j0 + p * nr, std::min<std::int64_t>(nr, n - p * nr), dst + p * ld, ld);
  };
  if (!kernel && a.col_stride == 1 && (small || in_place_pays<T>(M, N, K, threads, kn.mr, kn.nr))) {
    // A row panel: its rows and their stride, A itself or its widened copy.
    struct Rows {
      const T* data;
      std::int64_t stride;
    };
    return gemm_rows_in_place<T, T, true>(
        M, N, K, alpha, beta, c, threads, kn.mr, kn.nr, 1, kn.kc, pack_b,
        [&](std::int64_t i, std::int64_t k0) {
          const MatrixView<const T> panel =
              widened(a, i, std::min<std::int64_t>(kn.mr, M - i), k0, std::min(kn.kc, K - k0));
          return Rows{panel.data, panel.row_stride};
        },
        [&](std::int64_t k, Rows ai, int m, const T* bp, T* cij, std::int64_t rs, T al, T be) {
          kn.run_rows(k, ai.data, ai.stride, m, bp, cij, rs, al, be);
        },
        kNothingToBegin);
  }
  blocked_gemm<T, T>(
      M, N, K, alpha, beta, c, threads, {kn.mr, kn.nr, 1, 1, kn.mc, kn.kc, kn.nc},
      [&](std::int64_t i0, std::int64_t mc, std::int64_t k0, std::int64_t kc, T* dst) {
        const MatrixView<const T> block = widened(a, i0, mc, k0, kc);
        kn.pack_a ? kn.pack_a(block, 0, mc, 0, kc, kn.mr, dst) : gemm_detail::pack_a(block, 0, mc, 0, kc, kn.mr, dst);
      },
      pack_b, kn.run, kNothingToBegin);
}

void gemm_rounded(std::int64_t M, std::int64_t N, std::int64_t K, float alpha, MatrixView<const bfloat16> a,
                  MatrixView<const bfloat16> b, float beta, MatrixView<bfloat16> c, int threads,
                  const char* dot_kernel) {
  if (M <= 0 || N <= 0) return;
  const gemm_detail::MicroKernelBf16* dot = gemm_detail::bf16_dot(dot_kernel);
  // gemm()'s thin and direct loops, unless a kernel is named, and products of several k blocks go through float32.
  const bool small = N <= kSmallN && M * N * K <= kSmallWork;
  const bool other_loop =
      !dot_kernel && (M <= kThinRows || (small && !dot_reads_a_in_place(*dot, M, N, K, a, threads)));
  if (dot && K > 0 && K <= kBf16Kc && alpha != 0 && c.col_stride == 1 && !other_loop)
    return dot_gemm(*dot, M, N, K, alpha, a, b, beta, c, threads);
  // Otherwise in float32, in a buffer of this thread's (not scratch(): gemm() packs into that), rounded at the end;
  // the rows converted on the product's threads.
  thread_local AlignedBuffer<float> product;
  float* const wide = product.get(static_cast<std::size_t>(M * N));
  const bool parallel = threads != 1 && M * N >= kParallelGrain;
  if (beta != 0)
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int64_t i = 0; i < M; ++i) {
      if (c.col_stride == 1)
        widen_row_from_bf16(c.data + i * c.row_stride, wide + i * N, N);
      else
        for (std::int64_t j = 0; j < N; ++j)
          wide[i * N + j] = static_cast<float>(c.data[i * c.row_stride + j * c.col_stride]);
    }
  gemm<float, bfloat16>(M, N, K, alpha, a, b, beta, {wide, N, 1}, threads, nullptr, dot_kernel);
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t i = 0; i < M; ++i) {
    if (c.col_stride == 1)
      round_row_to_bf16(wide + i * N, c.data + i * c.row_stride, N);
    else
      for (std::int64_t j = 0; j < N; ++j) c.data[i * c.row_stride + j * c.col_stride] = bfloat16(wide[i * N + j]);
  }
}

template void gemm<float, float>(std::int64_t, std::int64_t, std::int64_t, float, MatrixView<const float>,
                                 MatrixView<const float>, float, MatrixView<float>, int, const GemmKernel<float>*,
                                 const char*);
template void gemm<double, double>(std::int64_t, std::int64_t, std::int64_t, double, MatrixView<const double>,
                                   MatrixView<const double>, double, MatrixView<double>, int, const GemmKernel<double>*,
                                   const char*);
template void gemm<float, bfloat16>(std::int64_t, std::int64_t, std::int64_t, float, MatrixView<const bfloat16>,
                                    MatrixView<const bfloat16>, float, MatrixView<float>, int, const GemmKernel<float>*,
                                    const char*);

}  // namespace stepformer::cpu
