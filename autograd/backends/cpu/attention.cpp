// FlashAttention on the CPU: the scores of one block of kTile queries against one tile of kTile keys at a time, an
// online softmax (a running max m and sum l per query, the partial output rescaled by exp(m_old - m_new)
// whenever the max grows), never the [Tq, Tk] matrix. The two products of a tile, scores = q k^T and
// out += weights v, are small GEMMs on the CPU backend's micro-kernels (gemm.h, one thread each); the softmax
// between them is a vectorised pass over the [kTile, kTile] tile, which stays in L1 or L2. Threads take (head, query
// block) pairs; under a causal mask the key tiles after a block's last query are skipped, so the blocks differ in cost
// and are handed out dynamically.
//
// Backward recomputes the weights from the saved lse, tile by tile, and turns each tile into its three gradient
// GEMMs (dV, dK, dQ). A thread owns a whole head (batch x heads of them share the threads), so dQ, which every
// key tile adds to, needs neither atomics nor a second pass, and the result is the same for any thread count.
// The formulas are the reference backend's (backends/reference/attention.cpp).
//
// bfloat16 operands (S) run the same code with float32 (T) everywhere else: every product reads bfloat16 and sums in
// float32 on the bfloat16 GEMM kernel, so the weights and ds are rounded to bfloat16 before the product that reads
// them (as FlashAttention-2 does on the GPU); the running statistics, lse and D are float32, and a head's gradients
// sum in float32 and are rounded once.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "../attention_math.h"
#include "aligned.h"
#include "cpu_backend.h"
#include "gemm.h"
#include "random_fill.h"
#include "strided.h"
#include "vmath.h"

namespace stepformer::cpu {

namespace {

constexpr std::int64_t kTile = 128;  // queries per block and keys per tile
// Under the causal mask, a tile that reaches past its block's first query is taken in bands of kBand queries, each
// against the keys it may see (up to its last query): the blocked triangle's products are not computed.
constexpr std::int64_t kBand = 64;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// n elements, not initialised: every tile is written before it is read, and a decode step, which calls the kernel
// once per token, should not clear a quarter of a megabyte each time. Aligned as the GEMM's operands like best.
template <class U>
AlignedArray<U> tile_of(std::int64_t n) {
  return aligned_array<U>(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)));
}

// A thread's tiles: [kTile, kTile] scores/weights, their gradients and the dropped weights; a block's outputs.
// For bfloat16 operands also the rounded copies of a tile the next product reads (ws, dss) and a head's gradients
// in float32 (gq, gk, gv).
template <class T, class S>
struct Scratch {
  static constexpr bool rounds = !std::is_same_v<T, S>;
  explicit Scratch(std::int64_t Dv)
      : s(tile_of<T>(kTile * kTile)),
        ds(tile_of<T>(kTile * kTile)),
        wf(tile_of<T>(kTile * kTile)),
        acc(tile_of<T>(kTile * Dv)),
        ws(tile_of<S>(rounds ? kTile * kTile : 0)),
        dss(tile_of<S>(rounds ? kTile * kTile : 0)) {}
  AlignedArray<T> s, ds, wf, acc;
  AlignedArray<S> ws, dss;
  AlignedBuffer<T> gq, gk, gv;
};

// The [rows, cols] tile x (row stride kTile) as a product's operand of type S: x itself, or its copy rounded into
// `rounded`.
template <class T, class S>
[[gnu::always_inline]] inline const S* operand(const T* x, AlignedArray<S>& rounded, std::int64_t rows,
                                               std::int64_t cols) {
  if constexpr (std::is_same_v<T, S>) {
    return x;
  } else {
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) rounded[r * kTile + c] = S(x[r * kTile + c]);
    return rounded.get();
  }
}

// How much of the tile of queries [i0, i1) and keys [j0, j1) is blocked. A tile blocked whole costs nothing:
// the scan of its mask is a byte per pair against the 2 (Dh + Dv) flops per pair of its GEMMs.
enum class Blocked { none, some, all };
template <class T>
Blocked blocked_in(const AttentionProblem<T>& p, std::int64_t bh, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                   std::int64_t j1) {
  const bool causal_some = p.mask.causal && j1 - 1 > i0;  // some key after some query
  if (!p.mask.data) return causal_some ? Blocked::some : Blocked::none;
  const std::int64_t b = bh / p.n.H, h = bh % p.n.H;
  bool any = false, every = true;
  for (std::int64_t i = i0; i < i1; ++i)
    for (std::int64_t j = j0; j < j1; ++j) {
      const bool x = p.mask.blocked(b, h, i, j);
      any |= x, every &= x;
    }
  return every ? Blocked::all : any ? Blocked::some : Blocked::none;
}

// s = scale * q[i0, i1) k[j0, j1)^T, [rows, cols] with row stride kTile, blocked pairs -inf.
template <class T, class S>
void scores(const AttentionProblem<S>& p, T* s, std::int64_t bh, std::int64_t i0, std::int64_t i1, std::int64_t j0,
            std::int64_t j1, Blocked blocked) {
  const AttentionDims& n = p.n;
  const std::int64_t rows = i1 - i0, cols = j1 - j0;
  gemm<T, S>(rows, cols, n.Dh, p.scale, {p.q + (bh * n.Tq + i0) * n.Dh, n.Dh, 1}, {p.keys(bh) + j0 * n.Dh, 1, n.Dh},
             T(0), {s, kTile, 1}, 1);
  if (blocked == Blocked::none) return;
  // AttentionMask::blocked, a row at a time: under the causal mask query i0 + r sees the keys up to itself, so the
  // row's tail from key i0 + r + 1 is one fill; the mask tensor, if any, is read for the keys before it.
  const std::int64_t b = bh / n.H, h = bh % n.H;
  for (std::int64_t r = 0; r < rows; ++r) {
    T* const row = s + r * kTile;
    const std::int64_t seen = p.mask.causal ? std::clamp<std::int64_t>(i0 + r + 1 - j0, 0, cols) : cols;
    std::fill(row + seen, row + cols, static_cast<T>(kNegInf));
    if (p.mask.data)
      for (std::int64_t c = 0; c < seen; ++c)
        if (p.mask.blocked(b, h, i0 + r, j0 + c)) row[c] = static_cast<T>(kNegInf);
  }
}

// f[c] = the dropout factor of (query i, key j0 + c) for the cols keys of a tile row, as dropout() draws it.
template <class T, class S>
[[gnu::always_inline]] inline void dropout_factors(const AttentionProblem<S>& p, T* f, std::int64_t row,
                                                   std::int64_t j0, std::int64_t cols) {
  const double keep = p.drop.p;
  const T scale = static_cast<T>(1.0 / (1.0 - keep));
  const std::int64_t first = row * p.n.Tk + j0;
  fill_pairs(f, first, first + cols, p.drop.seed, p.drop.offset,
             [&](std::uint64_t bits) { return uniform01(bits) < keep ? T(0) : scale; });
}

// Queries [i0, i1) of head bh against every key tile: out and lse of those rows. s holds a tile's scores, then
// its weights; acc the block's unnormalised outputs; m and l each query's running max and sum.
template <class T, class S>
[[gnu::always_inline]] inline void forward_block(const AttentionProblem<S>& p, S* out, T* lse, std::int64_t bh,
                                                 std::int64_t i0, std::int64_t i1, Scratch<T, S>& w) {
  const AttentionDims& n = p.n;
  const std::int64_t rows = i1 - i0;
  T* s = w.s.get();
  T* acc = w.acc.get();
  std::fill(acc, acc + rows * n.Dv, T(0));
  T m[kTile], l[kTile];
  std::fill(m, m + kTile, static_cast<T>(kNegInf));
  std::fill(l, l + kTile, T(0));
  // Causal: no query of the block sees a key at or after i1.
  const std::int64_t key_end = p.mask.causal ? std::min(n.Tk, i1) : n.Tk;
  for (std::int64_t j0 = 0; j0 < key_end; j0 += kTile) {
    const std::int64_t j1 = std::min(key_end, j0 + kTile);
    const std::int64_t band = p.mask.causal && j1 - 1 > i0 ? kBand : rows;
    for (std::int64_t r0 = 0; r0 < rows; r0 += band) {
      const std::int64_t r1 = std::min(rows, r0 + band);
      const std::int64_t jb = p.mask.causal ? std::min(j1, i0 + r1) : j1, cols = jb - j0;  // the keys r0..r1 may see
      if (cols <= 0) continue;
      const Blocked blocked = blocked_in(p, bh, i0 + r0, i0 + r1, j0, jb);
      if (blocked == Blocked::all) continue;
      scores(p, s, bh, i0 + r0, i0 + r1, j0, jb, blocked);
      for (std::int64_t r = r0; r < r1; ++r) {
        T* row = s + (r - r0) * kTile;
        T tile_max = static_cast<T>(kNegInf);
        for (std::int64_t c = 0; c < cols; ++c) tile_max = std::max(tile_max, row[c]);
        if (tile_max == static_cast<T>(kNegInf)) {  // every key of the tile blocked: weights 0, nothing else changes
          std::fill(row, row + cols, T(0));
          continue;
        }
        const T m_new = std::max(m[r], tile_max);
        const T rescale = exp_of(m[r] - m_new);  // exp(-inf) = 0 on the first tile that counts
        T* a = acc + r * n.Dv;
#pragma omp simd
        for (std::int64_t d = 0; d < n.Dv; ++d) a[d] *= rescale;
        T sum = 0;
#pragma omp simd reduction(+ : sum)
        for (std::int64_t c = 0; c < cols; ++c) sum += row[c] = exp_of(row[c] - m_new);  // blocked: exp(-inf) = 0
        l[r] = l[r] * rescale + sum;
        m[r] = m_new;
        if (p.drop.p > 0) {
          T* f = w.ds.get();
          dropout_factors(p, f, bh * n.Tq + i0 + r, j0, cols);
#pragma omp simd
          for (std::int64_t c = 0; c < cols; ++c) row[c] *= f[c];
        }
      }
      // acc[r0, r1) += weights [r1 - r0, cols] @ v[j0, jb)
      gemm<T, S>(r1 - r0, n.Dv, cols, T(1), {operand(s, w.ws, r1 - r0, cols), kTile, 1},
                 {p.values(bh) + j0 * n.Dv, n.Dv, 1}, T(1), {acc + r0 * n.Dv, n.Dv, 1}, 1);
    }
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t row = bh * n.Tq + i0 + r;
    const T inv = T(1) / l[r];  // l == 0 (no key seen): inf, and 0 * inf is NaN, as the composite's softmax
    for (std::int64_t d = 0; d < n.Dv; ++d) out[row * n.Dv + d] = static_cast<S>(acc[r * n.Dv + d] * inv);
    lse[row] = m[r] + static_cast<T>(std::log(static_cast<double>(l[r])));
  }
}

// Every gradient of head bh, key tile by key tile and, within each, query block by query block: the weights w
// recomputed from lse, dw = dout v^T (times the dropout factor f), ds = w (dw - D); then dV += (w f)^T dout,
// dK += scale ds^T q, dQ += scale ds k, each a small GEMM. One thread owns the head, so nothing is shared.
template <class T, class S>
[[gnu::always_inline]] inline void head_backward(const AttentionProblem<S>& p, S* dq, S* dk, S* dv, const S* dout,
                                                 const T* lse, const T* D, std::int64_t bh, Scratch<T, S>& w) {
  const AttentionDims& n = p.n;
  T* s = w.s.get();    // scores, then weights w
  T* ds = w.ds.get();  // dw, then ds
  T* wf = w.wf.get();  // w f (the weights as the forward used them), when there is dropout
  // Where the head's gradients sum: in dq, dk and dv themselves, or in float32 rounded into them at the end.
  T *gq, *gk, *gv;
  if constexpr (Scratch<T, S>::rounds) {
    gq = w.gq.get(static_cast<std::size_t>(n.Tq * n.Dh)), gk = w.gk.get(static_cast<std::size_t>(n.Tk * n.Dh));
    gv = w.gv.get(static_cast<std::size_t>(n.Tk * n.Dv));
  } else {
    gq = dq + bh * n.Tq * n.Dh, gk = dk + bh * n.Tk * n.Dh, gv = dv + bh * n.Tk * n.Dv;
  }
  std::fill(gq, gq + n.Tq * n.Dh, T(0));
  std::fill(gk, gk + n.Tk * n.Dh, T(0));
  std::fill(gv, gv + n.Tk * n.Dv, T(0));
  for (std::int64_t j0 = 0; j0 < n.Tk; j0 += kTile) {
    const std::int64_t j1 = std::min(n.Tk, j0 + kTile);
    const S* k_j = p.keys(bh) + j0 * n.Dh;
    const S* v_j = p.values(bh) + j0 * n.Dv;
    // Causal: the query blocks that end before j0 never see these keys.
    for (std::int64_t i0 = p.mask.causal ? j0 / kTile * kTile : 0; i0 < n.Tq; i0 += kTile) {
      const std::int64_t i1 = std::min(n.Tq, i0 + kTile);
      const std::int64_t band = p.mask.causal && j1 - 1 > i0 ? kBand : i1 - i0;
      for (std::int64_t b0 = i0; b0 < i1; b0 += band) {  // queries [b0, b1) against the keys [j0, jb) they may see
        const std::int64_t b1 = std::min(i1, b0 + band), rows = b1 - b0;
        const std::int64_t jb = p.mask.causal ? std::min(j1, b1) : j1, cols = jb - j0;
        if (cols <= 0) continue;
        const std::int64_t row0 = bh * n.Tq + b0;
        const Blocked blocked = blocked_in(p, bh, b0, b1, j0, jb);
        if (blocked == Blocked::all) continue;
        scores(p, s, bh, b0, b1, j0, jb, blocked);
        gemm<T, S>(rows, cols, n.Dv, T(1), {dout + row0 * n.Dv, n.Dv, 1}, {v_j, 1, n.Dv}, T(0), {ds, kTile, 1}, 1);
        for (std::int64_t r = 0; r < rows; ++r) {
          T* sr = s + r * kTile;
          T* dr = ds + r * kTile;
          const T L = lse[row0 + r], Dr = D[row0 + r];
          if (L == static_cast<T>(kNegInf)) {  // a query that saw no key: no gradient
            std::fill(sr, sr + cols, T(0));
            std::fill(dr, dr + cols, T(0));
            if (p.drop.p > 0) std::fill(wf + r * kTile, wf + r * kTile + cols, T(0));
            continue;
          }
          if (p.drop.p > 0) {
            T* fr = wf + r * kTile;  // the factors, then the weights times them
            dropout_factors(p, fr, row0 + r, j0, cols);
#pragma omp simd
            for (std::int64_t c = 0; c < cols; ++c) {
              sr[c] = exp_of(sr[c] - L);
              dr[c] = sr[c] * (dr[c] * fr[c] - Dr);
              fr[c] *= sr[c];
            }
          } else {
#pragma omp simd
            for (std::int64_t c = 0; c < cols; ++c) {
              sr[c] = exp_of(sr[c] - L);
              dr[c] = sr[c] * (dr[c] - Dr);
            }
          }
        }
        const S* used = operand(p.drop.p > 0 ? wf : s, w.ws, rows, cols);
        const S* dsr = operand(ds, w.dss, rows, cols);
        gemm<T, S>(cols, n.Dv, rows, T(1), {used, 1, kTile}, {dout + row0 * n.Dv, n.Dv, 1}, T(1),
                   {gv + j0 * n.Dv, n.Dv, 1}, 1);
        gemm<T, S>(cols, n.Dh, rows, p.scale, {dsr, 1, kTile}, {p.q + row0 * n.Dh, n.Dh, 1}, T(1),
                   {gk + j0 * n.Dh, n.Dh, 1}, 1);
        gemm<T, S>(rows, n.Dh, cols, p.scale, {dsr, kTile, 1}, {k_j, n.Dh, 1}, T(1), {gq + b0 * n.Dh, n.Dh, 1}, 1);
      }
    }
  }
  if constexpr (Scratch<T, S>::rounds) {
    const auto round_into = [](S* to, const T* from, std::int64_t count) {
      for (std::int64_t e = 0; e < count; ++e) to[e] = S(from[e]);
    };
    round_into(dq + bh * n.Tq * n.Dh, gq, n.Tq * n.Dh);
    round_into(dk + bh * n.Tk * n.Dh, gk, n.Tk * n.Dh);
    round_into(dv + bh * n.Tk * n.Dv, gv, n.Tk * n.Dv);
  }
}

std::int64_t blocks(std::int64_t n) { return (n + kTile - 1) / kTile; }

// The float and bfloat16 versions compiled per instruction set (vmath.h); double keeps the plain build.
STEPFORMER_SIMD_CLONES void forward_blocks(const AttentionProblem<float>& p, float* out, float* lse, std::int64_t bh,
                                           std::int64_t i0, std::int64_t i1, Scratch<float, float>& w) {
  forward_block(p, out, lse, bh, i0, i1, w);
}
STEPFORMER_SIMD_CLONES void forward_blocks(const AttentionProblem<bfloat16>& p, bfloat16* out, float* lse,
                                           std::int64_t bh, std::int64_t i0, std::int64_t i1,
                                           Scratch<float, bfloat16>& w) {
  forward_block(p, out, lse, bh, i0, i1, w);
}
void forward_blocks(const AttentionProblem<double>& p, double* out, double* lse, std::int64_t bh, std::int64_t i0,
                    std::int64_t i1, Scratch<double, double>& w) {
  forward_block(p, out, lse, bh, i0, i1, w);
}
STEPFORMER_SIMD_CLONES void heads_backward(const AttentionProblem<float>& p, float* dq, float* dk, float* dv,
                                           const float* dout, const float* lse, const float* D, std::int64_t bh,
                                           Scratch<float, float>& w) {
  head_backward(p, dq, dk, dv, dout, lse, D, bh, w);
}
STEPFORMER_SIMD_CLONES void heads_backward(const AttentionProblem<bfloat16>& p, bfloat16* dq, bfloat16* dk,
                                           bfloat16* dv, const bfloat16* dout, const float* lse, const float* D,
                                           std::int64_t bh, Scratch<float, bfloat16>& w) {
  head_backward(p, dq, dk, dv, dout, lse, D, bh, w);
}
void heads_backward(const AttentionProblem<double>& p, double* dq, double* dk, double* dv, const double* dout,
                    const double* lse, const double* D, std::int64_t bh, Scratch<double, double>& w) {
  head_backward(p, dq, dk, dv, dout, lse, D, bh, w);
}

}  // namespace

void CpuBackend::attention_forward(const TensorDesc& out, const TensorDesc& lse, const TensorDesc& q,
                                   const TensorDesc& k, const TensorDesc& v, const TensorDesc& blocked,
                                   const AttentionConfig& cfg) {
  dispatch_operands(q.dtype, "attention_forward", [&](auto z) {
    using S = decltype(z);
    using T = attention_compute_t<S>;
    const AttentionProblem<S> p = attention_problem<S>(q, k, v, blocked, cfg);
    const std::int64_t per_head = blocks(p.n.Tq), tasks = p.n.B * p.n.H * per_head;
    S* o = static_cast<S*>(out.data);
    T* l = static_cast<T*>(lse.data);
#pragma omp parallel if (tasks > 1)
    {
      Scratch<T, S> w(p.n.Dv);
#pragma omp for schedule(dynamic)
      for (std::int64_t t = 0; t < tasks; ++t) {
        const std::int64_t bh = t / per_head, i0 = (t % per_head) * kTile;
        forward_blocks(p, o, l, bh, i0, std::min(p.n.Tq, i0 + kTile), w);
      }
    }
  });
}

void CpuBackend::attention_backward(const TensorDesc& dq, const TensorDesc& dk, const TensorDesc& dv,
                                    const TensorDesc& dout, const TensorDesc& q, const TensorDesc& k,
                                    const TensorDesc& v, const TensorDesc& out, const TensorDesc& lse,
                                    const TensorDesc& blocked, const AttentionConfig& cfg) {
  dispatch_operands(q.dtype, "attention_backward", [&](auto z) {
    using S = decltype(z);
    using T = attention_compute_t<S>;
    const AttentionProblem<S> p = attention_problem<S>(q, k, v, blocked, cfg);
    const AttentionDims& n = p.n;
    const S* g = static_cast<const S*>(dout.data);
    const S* o = static_cast<const S*>(out.data);
    // D_i = dout_i . out_i, once per query (it equals sum_j w_ij dw_ij).
    std::vector<T> D(static_cast<std::size_t>(n.B * n.H * n.Tq));
#pragma omp parallel for
    for (std::int64_t row = 0; row < n.B * n.H * n.Tq; ++row) {
      T sum = 0;
      for (std::int64_t d = 0; d < n.Dv; ++d)
        sum += static_cast<T>(g[row * n.Dv + d]) * static_cast<T>(o[row * n.Dv + d]);
      D[static_cast<std::size_t>(row)] = sum;
    }
#pragma omp parallel if (n.B * n.H > 1)
    {
      Scratch<T, S> w(p.n.Dv);
#pragma omp for schedule(dynamic)
      for (std::int64_t bh = 0; bh < n.B * n.H; ++bh)
        heads_backward(p, static_cast<S*>(dq.data), static_cast<S*>(dk.data), static_cast<S*>(dv.data), g,
                       static_cast<const T*>(lse.data), D.data(), bh, w);
    }
  });
}

}  // namespace stepformer::cpu
