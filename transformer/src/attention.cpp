// Chapter 02. Shape legend in transformer/config.h.
#include "transformer/attention.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "autograd/errors.h"
#include "autograd/ops.h"

namespace stepformer::transformer {

double attention_scale(std::int64_t d_k) { return 1.0 / std::sqrt(static_cast<double>(d_k)); }

Attention scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& blocked,
                                       double dropout_p, bool training, Generator& gen) {
  if (q.dim() < 2 || k.dim() != q.dim() || v.dim() != q.dim() || q.size(-1) != k.size(-1) || k.size(-2) != v.size(-2))
    throw ShapeError(
        fmt::format("scaled_dot_product_attention: q {}, k {}, v {} do not fit [..., Tq, Dh], "
                    "[..., Tk, Dh], [..., Tk, Dv]",
                    to_string(q.shape()), to_string(k.shape()), to_string(v.shape())));
  // EXERCISE 2.3: weights = softmax(Q K^T / sqrt(d_k)) with blocked keys at -inf; context = weights V.
  Tensor scores = matmul(q, transpose(k, -2, -1)) * attention_scale(q.size(-1));  // [B, H, Tq, Tk]
  if (blocked.defined()) scores = masked_fill(scores, blocked, -std::numeric_limits<double>::infinity());
  const Tensor weights = softmax(scores, -1);                                    // [B, H, Tq, Tk]
  const Tensor context = matmul(dropout(weights, dropout_p, training, gen), v);  // [B, H, Tq, Dh]
  return {context, weights};
  // END EXERCISE
}

Tensor pad_mask(const Tensor& ids, std::int64_t pad_id) {
  if (ids.dim() != 2) throw ShapeError(fmt::format("pad_mask expected ids [B, S], got {}", to_string(ids.shape())));
  // EXERCISE 2.1: true where a key is PAD, shaped [B, 1, 1, S] to broadcast over heads and queries.
  const Tensor is_pad = eq(ids, scalar(static_cast<double>(pad_id), {DType::int64, ids.device()}));  // [B, S]
  return view(is_pad, {ids.size(0), 1, 1, ids.size(1)});                                             // [B, 1, 1, S]
  // END EXERCISE
}

Tensor subsequent_mask(std::int64_t T, Device device, std::int64_t start) {
  if (T < 1 || start < 0)
    throw ValueError(
        fmt::format("subsequent_mask: needs T >= 1 queries and start >= 0 earlier keys, got T = {}, "
                    "start = {}",
                    T, start));
  // EXERCISE 2.2: true where key position j is after query i's position start + i; [1, 1, T, start + T].
  const std::int64_t S = start + T;
  const Tensor j = view(arange(S, {DType::int64, device}), {1, S});            // key positions    [1, S]
  const Tensor i = view(arange(start, S, 1, {DType::int64, device}), {T, 1});  // query positions  [T, 1]
  return view(gt(j, i), {1, 1, T, S});                                         // blocked where j > i
  // END EXERCISE
}

Tensor decoder_mask(const Tensor& tgt_ids, std::int64_t pad_id) {
  // EXERCISE 6.1: the decoder's self-attention mask: PAD keys or future positions.
  return logical_or(pad_mask(tgt_ids, pad_id), subsequent_mask(tgt_ids.size(1), tgt_ids.device()));  // [B, 1, T, T]
  // END EXERCISE
}

const Tensor& AttentionWeights::tensor() const {
  if (!weights_.defined())
    throw ValueError(
        "attention weights: none were kept: MultiHeadAttention ran flash_attention, which never stores the "
        "[B, H, Tq, Tk] weights; set its need_weights (keep_attention_weights(model) sets every layer's) to run "
        "the composite, which keeps them");
  return weights_;
}

namespace {
int set_need_weights(nn::Module& m, bool keep) {
  int found = 0;
  if (auto* attention = dynamic_cast<MultiHeadAttention*>(&m)) {
    attention->need_weights = keep;
    ++found;
  }
  for (const auto& [name, child] : m.named_children()) found += set_need_weights(*child, keep);
  return found;
}
}  // namespace

void keep_attention_weights(nn::Module& model, bool keep) {
  if (set_need_weights(model, keep) == 0)
    throw ValueError(
        fmt::format("keep_attention_weights: '{}' holds no MultiHeadAttention (chapter 12's "
                    "GroupedQueryAttention always runs flash_attention)",
                    model.path()));
}

Tensor split_heads(const Tensor& x, std::int64_t H) {
  // EXERCISE 2.4: [B, T, D] -> [B, H, T, D/H], and back in merge_heads below.
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
  // EXERCISE 2.5: project queries, split heads, heads_attention, merge heads, project output.
  const Tensor q = split_heads((*w_q)(query), n_heads);  // [B, H, Tq, Dh]
  const Attention a = heads_attention(q, k, v, blocked);
  return {(*w_o)(merge_heads(a.context)), a.weights};  // [B, Tq, D], [B, H, Tq, Tk]
  // END EXERCISE
}

Attention MultiHeadAttention::heads_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const Tensor& blocked) {
  if (need_weights) return scaled_dot_product_attention(q, k, v, blocked, attn_dropout, is_training(), *gen_);
  // The same softmax(Q K^T / sqrt(d_k)) V, with the same dropout mask drawn from the same generator state.
  return {flash_attention(q, k, v, blocked, attention_scale(d_head), false, attn_dropout, is_training(), *gen_), {}};
}

}  // namespace stepformer::transformer
