// Chapter 02. Shape legend in transformer/config.h.
#include "transformer/attention.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "autograd/errors.h"
#include "autograd/ops.h"

namespace stepformer::transformer {

Attention scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& blocked,
                                       double dropout_p, bool training, Generator& gen) {
  if (q.dim() < 2 || k.dim() != q.dim() || v.dim() != q.dim() || q.size(-1) != k.size(-1) || k.size(-2) != v.size(-2))
    throw ShapeError(
        fmt::format("scaled_dot_product_attention: q {}, k {}, v {} do not fit [..., Tq, Dh], "
                    "[..., Tk, Dh], [..., Tk, Dv]",
                    to_string(q.shape()), to_string(k.shape()), to_string(v.shape())));
  // EXERCISE 2.3 (6 points): weights = softmax(Q K^T / sqrt(d_k)) with blocked keys at -inf; context = weights V.
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  // "We suspect that for large values of d_k, the dot products grow large in magnitude, pushing the
  // softmax function into regions where it has extremely small gradients. To counteract this effect, we
  // scale the dot products by 1/sqrt(d_k)."
  Tensor scores = matmul(q, transpose(k, -2, -1)) * scale;  // [B, H, Tq, Tk]
  if (blocked.defined()) scores = masked_fill(scores, blocked, -std::numeric_limits<double>::infinity());
  const Tensor weights = softmax(scores, -1);                                    // [B, H, Tq, Tk]
  const Tensor context = matmul(dropout(weights, dropout_p, training, gen), v);  // [B, H, Tq, Dh]
  return {context, weights};
  // END EXERCISE
}

Tensor pad_mask(const Tensor& ids, std::int64_t pad_id) {
  if (ids.dim() != 2) throw ShapeError(fmt::format("pad_mask expected ids [B, S], got {}", to_string(ids.shape())));
  // EXERCISE 2.1 (4 points): true where a key is PAD, shaped [B, 1, 1, S] to broadcast over heads and queries.
  const Tensor is_pad = eq(ids, scalar(static_cast<double>(pad_id), {DType::int64, ids.device()}));  // [B, S]
  return view(is_pad, {ids.size(0), 1, 1, ids.size(1)});                                             // [B, 1, 1, S]
  // END EXERCISE
}

Tensor subsequent_mask(std::int64_t T, Device device) {
  // EXERCISE 2.2 (4 points): true where the key position j is after the query position i, shaped [1, 1, T, T].
  const Tensor j = view(arange(T, {DType::int64, device}), {1, T});  // key positions    [1, T]
  const Tensor i = view(arange(T, {DType::int64, device}), {T, 1});  // query positions  [T, 1]
  return view(gt(j, i), {1, 1, T, T});                               // blocked where j > i
  // END EXERCISE
}

Tensor decoder_mask(const Tensor& tgt_ids, std::int64_t pad_id) {
  // EXERCISE 6.1 (4 points, needs 2.1 2.2): the decoder's self-attention mask: PAD keys or future positions.
  return logical_or(pad_mask(tgt_ids, pad_id), subsequent_mask(tgt_ids.size(1), tgt_ids.device()));  // [B, 1, T, T]
  // END EXERCISE
}

namespace {
thread_local int weights_kept = 0;
}
KeepAttentionWeights::KeepAttentionWeights() { ++weights_kept; }
KeepAttentionWeights::~KeepAttentionWeights() { --weights_kept; }
bool attention_weights_kept() { return weights_kept > 0; }

Tensor split_heads(const Tensor& x, std::int64_t H) {
  // EXERCISE 2.4 (5 points): [B, T, D] -> [B, H, T, D/H], and back in merge_heads below.
  const std::int64_t B = x.size(0), T = x.size(1), D = x.size(2);
  return permute(view(x, {B, T, H, D / H}), {0, 2, 1, 3});  // [B, T, D] -> [B, T, H, Dh] -> [B, H, T, Dh]
  // END EXERCISE
}

Tensor merge_heads(const Tensor& x) {
  // EXERCISE 2.4 (continued)
  const std::int64_t B = x.size(0), H = x.size(1), T = x.size(2), Dh = x.size(3);
  // The permuted tensor is not contiguous, so this reshape copies; view() refuses it (a walkthrough's mistake,
  // docs/seeds.md).
  return reshape(permute(x, {0, 2, 1, 3}), {B, T, H * Dh});  // [B, H, T, Dh] -> [B, T, H, Dh] -> [B, T, D]
  // END EXERCISE
}

MultiHeadAttention::MultiHeadAttention(std::int64_t d, std::int64_t h, double p, Generator& gen)
    : d_model(d), n_heads(h), d_head(h > 0 ? d / h : 0), attn_dropout(p), gen_(&gen) {
  if (h < 1 || d % h != 0)
    throw ValueError(fmt::format("MultiHeadAttention: d_model {} is not divisible by n_heads {}", d, h));
  w_q = register_module("w_q", std::make_shared<nn::Linear>(d, d, true, gen));
  w_k = register_module("w_k", std::make_shared<nn::Linear>(d, d, true, gen));
  w_v = register_module("w_v", std::make_shared<nn::Linear>(d, d, true, gen));
  w_o = register_module("w_o", std::make_shared<nn::Linear>(d, d, true, gen));
}

Attention MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                      const Tensor& blocked) {
  for (const Tensor* t : {&key, &value})
    if (t->dim() != 3 || t->size(-1) != d_model)
      throw ShapeError(fmt::format("MultiHeadAttention expected [B, T, {}], got {}", d_model, to_string(t->shape())));
  return attend(query, key_heads(key), value_heads(value), blocked);
}

Tensor MultiHeadAttention::key_heads(const Tensor& key) { return split_heads((*w_k)(key), n_heads); }  // [B, H, Tk, Dh]
Tensor MultiHeadAttention::value_heads(const Tensor& value) {
  return split_heads((*w_v)(value), n_heads);
}  // [B, H, Tk, Dh]

Attention MultiHeadAttention::attend(const Tensor& query, const Tensor& k, const Tensor& v, const Tensor& blocked) {
  const ScopeGuard scope = enter_scope();  // also an entry point of its own (the decoder's cached step)
  if (query.dim() != 3 || query.size(-1) != d_model)
    throw ShapeError(fmt::format("MultiHeadAttention expected [B, T, {}], got {}", d_model, to_string(query.shape())));
  // EXERCISE 2.5 (4 points, needs 2.3 2.4): project queries, split heads, heads_attention, merge heads, project output.
  const Tensor q = split_heads((*w_q)(query), n_heads);  // [B, H, Tq, Dh]
  const Attention a = heads_attention(q, k, v, blocked);
  return {(*w_o)(merge_heads(a.context)), a.weights};  // [B, Tq, D], [B, H, Tq, Tk]
  // END EXERCISE
}

Attention MultiHeadAttention::heads_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const Tensor& blocked) {
  if (attention_weights_kept())
    return scaled_dot_product_attention(q, k, v, blocked, attn_dropout, is_training(), *gen_);
  // The same softmax(Q K^T / sqrt(d_k)) V, with the same dropout mask drawn from the same generator state.
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  return {flash_attention(q, k, v, blocked, scale, false, attn_dropout, is_training(), *gen_), Tensor()};
}

}  // namespace stepformer::transformer
