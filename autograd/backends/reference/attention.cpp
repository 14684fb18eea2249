// Attention, the definition the tiled kernels are held to: for each query row, every score of the row at once
// (one row of Tk doubles, never the [Tq, Tk] matrix), then the softmax and the weighted sum of the values.
//   forward:  s_j = scale q . k_j (blocked: -inf), m = max s, l = sum exp(s_j - m),
//             out = sum_j exp(s_j - m) / l * drop_j * v_j,  lse = m + log l
//   backward: p_j = exp(s_j - lse) (the weights again, from the saved lse), D = dout . out,
//             dp_j = drop_j * dout . v_j,  ds_j = p_j (dp_j - D),
//             dq += scale ds_j k_j,  dk_j += scale ds_j q,  dv_j += p_j drop_j dout
// D = sum_j p_j dp_j because out = sum_j p_j drop_j v_j: one dot product instead of a sum over the row.
#include <cmath>
#include <limits>
#include <vector>

#include "../attention_math.h"
#include "reference_backend.h"
#include "strided.h"

namespace stepformer::reference {

namespace {

double dot(const double* a, const double* b, std::int64_t n) {
  double s = 0;
  for (std::int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// A tensor as contiguous doubles, by its strides (the sums of this file are in double whatever the dtype, bfloat16
// included; k and v may be views of a longer cache).
std::vector<double> as_doubles(const TensorDesc& t) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(t.numel()));
  dispatch_operands(t.dtype, "attention", [&](auto z) {
    using T = decltype(z);
    for_each_index(t, [&](const Index& i) { out.push_back(static_cast<double>(at<T>(t, i))); });
  });
  return out;
}

void store(const TensorDesc& t, const std::vector<double>& values) {
  dispatch_operands(t.dtype, "attention", [&](auto z) {
    using T = decltype(z);
    for (std::size_t i = 0; i < values.size(); ++i)
      flat<T>(t, static_cast<std::int64_t>(i)) = static_cast<T>(values[i]);
  });
}

// The scores of query i of head (b, h) against every key, blocked ones -inf.
void scores(std::vector<double>& s, const AttentionDims& n, const AttentionMask& mask, double scale, const double* q,
            const double* k, std::int64_t b, std::int64_t h, std::int64_t i) {
  for (std::int64_t j = 0; j < n.Tk; ++j)
    s[j] = mask.blocked(b, h, i, j) ? -std::numeric_limits<double>::infinity() : scale * dot(q, k + j * n.Dh, n.Dh);
}

}  // namespace

void ReferenceBackend::attention_forward(const TensorDesc& out, const TensorDesc& lse, const TensorDesc& q,
                                         const TensorDesc& k, const TensorDesc& v, const TensorDesc& blocked,
                                         const AttentionConfig& cfg) {
  const AttentionDims n = attention_dims(q, v);
  const AttentionMask mask = attention_mask(blocked, cfg.causal);
  const AttentionDropout drop = attention_dropout(cfg);
  const std::vector<double> Q = as_doubles(q), K = as_doubles(k), V = as_doubles(v);
  std::vector<double> O(static_cast<std::size_t>(out.numel())), L(static_cast<std::size_t>(lse.numel()));
  std::vector<double> s(static_cast<std::size_t>(n.Tk));
  for (std::int64_t b = 0; b < n.B; ++b)
    for (std::int64_t h = 0; h < n.H; ++h) {
      const std::int64_t bh = b * n.H + h, kv = b * (n.H / n.group) + h / n.group;  // the key/value head h reads
      const double* k_bh = &K[kv * n.Tk * n.Dh];
      const double* v_bh = &V[kv * n.Tk * n.Dv];
      for (std::int64_t i = 0; i < n.Tq; ++i) {
        const std::int64_t row = bh * n.Tq + i;
        scores(s, n, mask, cfg.scale, &Q[row * n.Dh], k_bh, b, h, i);
        double m = -std::numeric_limits<double>::infinity();
        for (const double x : s) m = std::max(m, x);
        double l = 0;
        for (const double x : s) l += m == -std::numeric_limits<double>::infinity() ? 0.0 : std::exp(x - m);
        double* o = &O[row * n.Dv];
        for (std::int64_t j = 0; j < n.Tk; ++j) {
          if (s[j] == -std::numeric_limits<double>::infinity()) continue;
          const double w = std::exp(s[j] - m) * drop.factor(static_cast<std::uint64_t>(row * n.Tk + j));
          for (std::int64_t d = 0; d < n.Dv; ++d) o[d] += w * v_bh[j * n.Dv + d];
        }
        for (std::int64_t d = 0; d < n.Dv; ++d) o[d] /= l;  // l == 0 (nothing seen): 0 / 0, NaN
        L[row] = m + std::log(l);
      }
    }
  store(out, O);
  store(lse, L);
}

void ReferenceBackend::attention_backward(const TensorDesc& dq, const TensorDesc& dk, const TensorDesc& dv,
                                          const TensorDesc& dout, const TensorDesc& q, const TensorDesc& k,
                                          const TensorDesc& v, const TensorDesc& out, const TensorDesc& lse,
                                          const TensorDesc& blocked, const AttentionConfig& cfg) {
  const AttentionDims n = attention_dims(q, v);
  const AttentionMask mask = attention_mask(blocked, cfg.causal);
  const AttentionDropout drop = attention_dropout(cfg);
  const std::vector<double> Q = as_doubles(q), K = as_doubles(k), V = as_doubles(v), O = as_doubles(out),
                            dO = as_doubles(dout), L = as_doubles(lse);
  std::vector<double> dQ(Q.size()), dK(static_cast<std::size_t>(dk.numel())), dV(static_cast<std::size_t>(dv.numel())),
      s(static_cast<std::size_t>(n.Tk));
  for (std::int64_t b = 0; b < n.B; ++b)
    for (std::int64_t h = 0; h < n.H; ++h) {
      const std::int64_t bh = b * n.H + h, kv = b * (n.H / n.group) + h / n.group;  // the key/value head h reads
      for (std::int64_t i = 0; i < n.Tq; ++i) {
        const std::int64_t row = bh * n.Tq + i;
        const double* q_i = &Q[row * n.Dh];
        const double* do_i = &dO[row * n.Dv];
        scores(s, n, mask, cfg.scale, q_i, &K[kv * n.Tk * n.Dh], b, h, i);
        const double D = dot(do_i, &O[row * n.Dv], n.Dv);
        for (std::int64_t j = 0; j < n.Tk; ++j) {
          if (s[j] == -std::numeric_limits<double>::infinity()) continue;
          const std::int64_t key = bh * n.Tk + j, read = kv * n.Tk + j;  // its place in dK and dV, in K and V
          const double p = std::exp(s[j] - L[row]), f = drop.factor(static_cast<std::uint64_t>(row * n.Tk + j));
          const double ds = p * (f * dot(do_i, &V[read * n.Dv], n.Dv) - D);
          for (std::int64_t d = 0; d < n.Dh; ++d) {
            dQ[row * n.Dh + d] += cfg.scale * ds * K[read * n.Dh + d];
            dK[key * n.Dh + d] += cfg.scale * ds * q_i[d];
          }
          for (std::int64_t d = 0; d < n.Dv; ++d) dV[key * n.Dv + d] += p * f * do_i[d];
        }
      }
    }
  store(dq, dQ);
  store(dk, dK);
  store(dv, dV);
}

}  // namespace stepformer::reference
