// FlashAttention on the CPU: the scores of one block of queries against one tile of keys at a time, an online
// softmax (a running max m and sum l per query, the partial output rescaled by exp(m_old - m_new) whenever the
// max grows), never the [Tq, Tk] matrix. A key tile (kTile rows of K and of V) stays in L1/L2 while every query
// of the block reads it. Threads take (head, query block) pairs; under a causal mask the key tiles after a
// block's last query are skipped, so the blocks differ in cost and are handed out dynamically.
//
// Backward recomputes the weights from the saved lse, in two passes that each own what they write (no atomics,
// the same result for any thread count): dK and dV by key tile, looping over the queries; dQ by query block,
// looping over the keys. The formulas are the reference backend's (backends/reference/attention.cpp).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../attention_math.h"
#include "cpu_backend.h"
#include "strided.h"
#include "vmath.h"

namespace stepformer::cpu {

namespace {

constexpr std::int64_t kTile = 64;  // queries per block and keys per tile

template <class T>
struct Problem {
  const T *q, *k, *v;
  AttentionDims n;
  AttentionMask mask;
  AttentionDropout drop;
  T scale;
};

template <class T>
Problem<T> problem(const TensorDesc& q, const TensorDesc& k, const TensorDesc& v, const TensorDesc& blocked,
                   const AttentionConfig& cfg) {
  return {static_cast<const T*>(q.data), static_cast<const T*>(k.data),       static_cast<const T*>(v.data),
          attention_dims(q, v),          attention_mask(blocked, cfg.causal), attention_dropout(cfg),
          static_cast<T>(cfg.scale)};
}

template <class T>
[[gnu::always_inline]] inline T dot(const T* a, const T* b, std::int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

template <class T>
[[gnu::always_inline]] inline void axpy(T* y, T a, const T* x, std::int64_t n) {
#pragma omp simd
  for (std::int64_t d = 0; d < n; ++d) y[d] += a * x[d];
}

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Queries [i0, i1) of head bh against every key tile: out and lse of those rows. acc holds the block's
// unnormalised outputs, m and l its running max and sum.
template <class T>
[[gnu::always_inline]] inline void forward_block(const Problem<T>& p, T* out, T* lse, std::int64_t bh, std::int64_t i0,
                                                 std::int64_t i1, std::vector<T>& acc) {
  const AttentionDims& n = p.n;
  const std::int64_t b = bh / n.H, h = bh % n.H;
  const T* k = p.k + bh * n.Tk * n.Dh;
  const T* v = p.v + bh * n.Tk * n.Dv;
  acc.assign(static_cast<std::size_t>((i1 - i0) * n.Dv), T(0));
  T m[kTile], l[kTile], s[kTile];
  std::fill(m, m + kTile, static_cast<T>(kNegInf));
  std::fill(l, l + kTile, T(0));
  // Causal: no query of the block sees a key after i1 - 1.
  const std::int64_t key_end = p.mask.causal ? std::min(n.Tk, i1) : n.Tk;
  for (std::int64_t j0 = 0; j0 < key_end; j0 += kTile) {
    const std::int64_t j1 = std::min(key_end, j0 + kTile);
    for (std::int64_t i = i0; i < i1; ++i) {
      const std::int64_t r = i - i0, row = bh * n.Tq + i;
      const T* q_i = p.q + row * n.Dh;
      T tile_max = static_cast<T>(kNegInf);
      for (std::int64_t j = j0; j < j1; ++j) {
        s[j - j0] = p.mask.blocked(b, h, i, j) ? static_cast<T>(kNegInf) : p.scale * dot(q_i, k + j * n.Dh, n.Dh);
        tile_max = std::max(tile_max, s[j - j0]);
      }
      if (tile_max == static_cast<T>(kNegInf)) continue;  // every key of the tile blocked: nothing changes
      T* a = acc.data() + r * n.Dv;
      const T m_new = std::max(m[r], tile_max);
      const T rescale = exp_of(m[r] - m_new);  // exp(-inf) = 0 on the first tile that counts
      l[r] *= rescale;
#pragma omp simd
      for (std::int64_t d = 0; d < n.Dv; ++d) a[d] *= rescale;
      for (std::int64_t j = j0; j < j1; ++j) {
        const T w = exp_of(s[j - j0] - m_new);  // blocked: exp(-inf) = 0
        l[r] += w;
        const T wd = w * static_cast<T>(p.drop.factor(static_cast<std::uint64_t>(row * n.Tk + j)));
        if (wd != T(0)) axpy(a, wd, v + j * n.Dv, n.Dv);
      }
      m[r] = m_new;
    }
  }
  for (std::int64_t i = i0; i < i1; ++i) {
    const std::int64_t r = i - i0, row = bh * n.Tq + i;
    const T inv = T(1) / l[r];  // l == 0 (no key seen): inf, and 0 * inf is NaN, as the composite's softmax
    for (std::int64_t d = 0; d < n.Dv; ++d) out[row * n.Dv + d] = acc[static_cast<std::size_t>(r * n.Dv + d)] * inv;
    lse[row] = m[r] + static_cast<T>(std::log(static_cast<double>(l[r])));
  }
}

// The gradient of score (i, j) times scale^-1, and the weight (times its dropout factor), recomputed from lse.
template <class T>
struct ScoreGrad {
  T ds, pf;
};
template <class T>
[[gnu::always_inline]] inline ScoreGrad<T> score_grad(const Problem<T>& p, const T* dout, const T* lse, const T* D,
                                                      std::int64_t bh, std::int64_t i, std::int64_t j) {
  const AttentionDims& n = p.n;
  const std::int64_t row = bh * n.Tq + i, key = bh * n.Tk + j;
  const T w = exp_of(p.scale * dot(p.q + row * n.Dh, p.k + key * n.Dh, n.Dh) - lse[row]);
  const T f = static_cast<T>(p.drop.factor(static_cast<std::uint64_t>(row * n.Tk + j)));
  const T dw = f == T(0) ? T(0) : f * dot(dout + row * n.Dv, p.v + key * n.Dv, n.Dv);
  return {w * (dw - D[row]), w * f};
}

// dK and dV of keys [j0, j1) of head bh, from every query that may see them.
template <class T>
[[gnu::always_inline]] inline void key_tile_backward(const Problem<T>& p, T* dk, T* dv, const T* dout, const T* lse,
                                                     const T* D, std::int64_t bh, std::int64_t j0, std::int64_t j1) {
  const AttentionDims& n = p.n;
  const std::int64_t b = bh / n.H, h = bh % n.H;
  std::fill(dk + (bh * n.Tk + j0) * n.Dh, dk + (bh * n.Tk + j1) * n.Dh, T(0));
  std::fill(dv + (bh * n.Tk + j0) * n.Dv, dv + (bh * n.Tk + j1) * n.Dv, T(0));
  for (std::int64_t i = p.mask.causal ? j0 : 0; i < n.Tq; ++i) {  // causal: earlier queries never see these keys
    const std::int64_t row = bh * n.Tq + i;
    if (lse[row] == static_cast<T>(kNegInf)) continue;  // a query that saw no key
    for (std::int64_t j = j0; j < j1; ++j) {
      if (p.mask.blocked(b, h, i, j)) continue;
      const ScoreGrad<T> g = score_grad(p, dout, lse, D, bh, i, j);
      const std::int64_t key = bh * n.Tk + j;
      axpy(dv + key * n.Dv, g.pf, dout + row * n.Dv, n.Dv);
      axpy(dk + key * n.Dh, p.scale * g.ds, p.q + row * n.Dh, n.Dh);
    }
  }
}

// dQ of queries [i0, i1) of head bh, from every key they may see.
template <class T>
[[gnu::always_inline]] inline void query_block_backward(const Problem<T>& p, T* dq, const T* dout, const T* lse,
                                                        const T* D, std::int64_t bh, std::int64_t i0, std::int64_t i1) {
  const AttentionDims& n = p.n;
  const std::int64_t b = bh / n.H, h = bh % n.H;
  for (std::int64_t i = i0; i < i1; ++i) {
    const std::int64_t row = bh * n.Tq + i;
    T* dq_i = dq + row * n.Dh;
    std::fill(dq_i, dq_i + n.Dh, T(0));
    if (lse[row] == static_cast<T>(kNegInf)) continue;
    const std::int64_t key_end = p.mask.causal ? std::min(n.Tk, i + 1) : n.Tk;
    for (std::int64_t j = 0; j < key_end; ++j) {
      if (p.mask.blocked(b, h, i, j)) continue;
      axpy(dq_i, p.scale * score_grad(p, dout, lse, D, bh, i, j).ds, p.k + (bh * n.Tk + j) * n.Dh, n.Dh);
    }
  }
}

std::int64_t blocks(std::int64_t n) { return (n + kTile - 1) / kTile; }

// The float versions compiled per instruction set (vmath.h); double keeps the plain build.
STEPFORMER_SIMD_CLONES void forward_blocks(const Problem<float>& p, float* out, float* lse, std::int64_t bh,
                                           std::int64_t i0, std::int64_t i1, std::vector<float>& acc) {
  forward_block(p, out, lse, bh, i0, i1, acc);
}
void forward_blocks(const Problem<double>& p, double* out, double* lse, std::int64_t bh, std::int64_t i0,
                    std::int64_t i1, std::vector<double>& acc) {
  forward_block(p, out, lse, bh, i0, i1, acc);
}
STEPFORMER_SIMD_CLONES void key_tiles(const Problem<float>& p, float* dk, float* dv, const float* dout,
                                      const float* lse, const float* D, std::int64_t bh, std::int64_t j0,
                                      std::int64_t j1) {
  key_tile_backward(p, dk, dv, dout, lse, D, bh, j0, j1);
}
void key_tiles(const Problem<double>& p, double* dk, double* dv, const double* dout, const double* lse, const double* D,
               std::int64_t bh, std::int64_t j0, std::int64_t j1) {
  key_tile_backward(p, dk, dv, dout, lse, D, bh, j0, j1);
}
STEPFORMER_SIMD_CLONES void query_blocks(const Problem<float>& p, float* dq, const float* dout, const float* lse,
                                         const float* D, std::int64_t bh, std::int64_t i0, std::int64_t i1) {
  query_block_backward(p, dq, dout, lse, D, bh, i0, i1);
}
void query_blocks(const Problem<double>& p, double* dq, const double* dout, const double* lse, const double* D,
                  std::int64_t bh, std::int64_t i0, std::int64_t i1) {
  query_block_backward(p, dq, dout, lse, D, bh, i0, i1);
}

}  // namespace

void CpuBackend::attention_forward(const TensorDesc& out, const TensorDesc& lse, const TensorDesc& q,
                                   const TensorDesc& k, const TensorDesc& v, const TensorDesc& blocked,
                                   const AttentionConfig& cfg) {
  dispatch_floating(q.dtype, "attention_forward", [&](auto z) {
    using T = decltype(z);
    const Problem<T> p = problem<T>(q, k, v, blocked, cfg);
    const std::int64_t per_head = blocks(p.n.Tq), tasks = p.n.B * p.n.H * per_head;
    T* o = static_cast<T*>(out.data);
    T* l = static_cast<T*>(lse.data);
#pragma omp parallel
    {
      std::vector<T> acc;
#pragma omp for schedule(dynamic)
      for (std::int64_t t = 0; t < tasks; ++t) {
        const std::int64_t bh = t / per_head, i0 = (t % per_head) * kTile;
        forward_blocks(p, o, l, bh, i0, std::min(p.n.Tq, i0 + kTile), acc);
      }
    }
  });
}

void CpuBackend::attention_backward(const TensorDesc& dq, const TensorDesc& dk, const TensorDesc& dv,
                                    const TensorDesc& dout, const TensorDesc& q, const TensorDesc& k,
                                    const TensorDesc& v, const TensorDesc& out, const TensorDesc& lse,
                                    const TensorDesc& blocked, const AttentionConfig& cfg) {
  dispatch_floating(q.dtype, "attention_backward", [&](auto z) {
    using T = decltype(z);
    const Problem<T> p = problem<T>(q, k, v, blocked, cfg);
    const AttentionDims& n = p.n;
    const T* g = static_cast<const T*>(dout.data);
    const T* o = static_cast<const T*>(out.data);
    const T* l = static_cast<const T*>(lse.data);
    // D_i = dout_i . out_i, once per query (it equals sum_j w_ij dw_ij).
    std::vector<T> D(static_cast<std::size_t>(n.B * n.H * n.Tq));
#pragma omp parallel for
    for (std::int64_t row = 0; row < n.B * n.H * n.Tq; ++row) D[row] = dot(g + row * n.Dv, o + row * n.Dv, n.Dv);
    const std::int64_t key_tiles_per_head = blocks(n.Tk), query_blocks_per_head = blocks(n.Tq);
#pragma omp parallel for schedule(dynamic)
    for (std::int64_t t = 0; t < n.B * n.H * key_tiles_per_head; ++t) {
      const std::int64_t bh = t / key_tiles_per_head, j0 = (t % key_tiles_per_head) * kTile;
      key_tiles(p, static_cast<T*>(dk.data), static_cast<T*>(dv.data), g, l, D.data(), bh, j0,
                std::min(n.Tk, j0 + kTile));
    }
#pragma omp parallel for schedule(dynamic)
    for (std::int64_t t = 0; t < n.B * n.H * query_blocks_per_head; ++t) {
      const std::int64_t bh = t / query_blocks_per_head, i0 = (t % query_blocks_per_head) * kTile;
      query_blocks(p, static_cast<T*>(dq.data), g, l, D.data(), bh, i0, std::min(n.Tq, i0 + kTile));
    }
  });
}

}  // namespace stepformer::cpu
