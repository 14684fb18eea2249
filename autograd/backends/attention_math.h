#pragma once
// What the attention kernels of every backend share, written once (host and device under nvcc): which keys a
// query may see, and the dropout factor of each weight. backend.h documents the kernels.
#include <cstdint>

#include "autograd/backend.h"
#include "autograd/bfloat16.h"
#include "autograd/random.h"

namespace stepformer {

// The sizes of one attention call, read from q [B, H, Tq, Dh] and v [B, Hkv, Tk, Dv]: H query heads share
// Hkv key/value heads, H / Hkv of them each.
struct AttentionDims {
  std::int64_t B, H, Tq, Tk, Dh, Dv, group;
};
inline AttentionDims attention_dims(const TensorDesc& q, const TensorDesc& v) {
  return {q.shape[0], q.shape[1], q.shape[2], v.shape[2], q.shape[3], v.shape[3], q.shape[1] / v.shape[1]};
}

// Which keys each query may not see: `causal` (key after query) or the boolean mask, broadcast by strides.
struct AttentionMask {
  const bool* data = nullptr;
  std::int64_t sb = 0, sh = 0, si = 0, sj = 0;  // strides over [B, H, Tq, Tk]; 0 broadcasts
  bool causal = false;

  STEPFORMER_HD bool blocked(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    return (causal && j > i) || (data && data[b * sb + h * sh + i * si + j * sj]);
  }
};
inline AttentionMask attention_mask(const TensorDesc& blocked, bool causal) {
  AttentionMask m;
  m.causal = causal;
  if (blocked.data) {
    m.data = static_cast<const bool*>(blocked.data);
    m.sb = blocked.strides[0], m.sh = blocked.strides[1], m.si = blocked.strides[2], m.sj = blocked.strides[3];
  }
  return m;
}

// The factor of weight (b, h, i, j), whose place in [B, H, Tq, Tk] is `index`: 1 without dropout, else 0 or
// 1 / (1 - p) exactly as random_fill's dropout fill draws it (autograd/random.h), so that backward, which
// draws it again, and the composite attention, which draws it as a tensor, drop the same weights.
struct AttentionDropout {
  double p = 0;
  std::uint64_t seed = 0, offset = 0;

  STEPFORMER_HD double factor(std::uint64_t index) const {
    if (p == 0) return 1.0;
    return uniform01(random_bits(seed, offset, index)) < p ? 0.0 : 1.0 / (1.0 - p);
  }
};
inline AttentionDropout attention_dropout(const AttentionConfig& cfg) { return {cfg.dropout, cfg.seed, cfg.offset}; }

// The type a kernel computes in for operands of type T: T itself, or float32 for bfloat16 operands (their products
// sum in float32, and the softmax statistics, lse and the gradients' sums are float32 too).
template <class T>
struct AttentionCompute {
  using type = T;
};
template <>
struct AttentionCompute<bfloat16> {
  using type = float;
};
template <class T>
using attention_compute_t = typename AttentionCompute<T>::type;

// Everything a kernel reads about one call, typed: the operands, the sizes, the mask, the dropout, the scale.
// Query head (b, h) reads the keys and values of head (b, h / group), whose Tk rows are packed (row j at j * Dh)
// but which may lie anywhere: k_sb, k_sh (v_sb, v_sh) are the strides of k's (v's) batch and head dimensions,
// so a KV cache's first Tk rows of a longer buffer are read where they are.
template <class T>
struct AttentionProblem {
  const T *q, *k, *v;
  AttentionDims n;
  AttentionMask mask;
  AttentionDropout drop;
  attention_compute_t<T> scale;
  std::int64_t k_sb, k_sh, v_sb, v_sh;

  STEPFORMER_HD const T* keys(std::int64_t bh) const { return k + bh / n.H * k_sb + bh % n.H / n.group * k_sh; }
  STEPFORMER_HD const T* values(std::int64_t bh) const { return v + bh / n.H * v_sb + bh % n.H / n.group * v_sh; }
};
template <class T>
AttentionProblem<T> attention_problem(const TensorDesc& q, const TensorDesc& k, const TensorDesc& v,
                                      const TensorDesc& blocked, const AttentionConfig& cfg) {
  return {static_cast<const T*>(q.data),
          static_cast<const T*>(k.data),
          static_cast<const T*>(v.data),
          attention_dims(q, v),
          attention_mask(blocked, cfg.causal),
          attention_dropout(cfg),
          static_cast<attention_compute_t<T>>(cfg.scale),
          k.strides[0],
          k.strides[1],
          v.strides[0],
          v.strides[1]};
}

}  // namespace stepformer
