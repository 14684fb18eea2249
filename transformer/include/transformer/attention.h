#pragma once
// Chapter 02 — attention and masks. Read docs/02_attention.md beside this file.
//
// Masks are boolean and mark what is BLOCKED: true = "this query may not look at this key". They
// broadcast against the scores [B, H, Tq, Tk], so a pad mask is [B, 1, 1, Tk] and the subsequent mask
// [1, 1, T, T].
#include "autograd/random.h"
#include "nn/layers.h"

namespace stepformer::transformer {

struct Attention {
  Tensor context;  // [B, H, Tq, Dh] (from scaled_dot_product_attention) or [B, Tq, D] (from MultiHeadAttention)
  Tensor weights;  // [B, H, Tq, Tk]: each row sums to 1 over the keys it may see, blocked keys exactly 0
};

// "Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V" (section 3.2.1, equation 1). Blocked positions get
// -inf before the softmax, so their weight is exactly 0. `dropout` (on the weights, as the annotated
// Transformer and torch.nn.MultiheadAttention) is applied only when `training`.
Attention scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& blocked = {},
                                       double dropout = 0.0, bool training = false,
                                       Generator& gen = default_generator());

// Keys that are PAD: ids [B, S] -> bool [B, 1, 1, S].
Tensor pad_mask(const Tensor& ids, std::int64_t pad_id);
// "masking out (setting to -inf) all values in the input of the softmax which correspond to illegal
// connections" (3.2.3): position i may not see j > i. -> bool [1, 1, T, T].
Tensor subsequent_mask(std::int64_t T, Device device = default_device());
// The decoder's self-attention mask: PAD keys or future positions. tgt ids [B, T] -> bool [B, 1, T, T].
Tensor decoder_mask(const Tensor& tgt_ids, std::int64_t pad_id);

// While one lives on this thread, MultiHeadAttention computes the [B, H, Tq, Tk] weights (chapter 02's
// composite) and returns them, for the demos that draw them; otherwise it calls flash_attention (ops.h), which
// gives the same context without ever storing the weights, and Attention::weights is undefined (PyTorch's
// need_weights=False, which its TransformerEncoderLayer passes too).
class KeepAttentionWeights {
 public:
  KeepAttentionWeights();
  ~KeepAttentionWeights();
  KeepAttentionWeights(const KeepAttentionWeights&) = delete;
  KeepAttentionWeights& operator=(const KeepAttentionWeights&) = delete;
};
bool attention_weights_kept();

// [B, T, D] -> [B, H, T, Dh] and back (a view and a permute; merging copies once, via reshape).
Tensor split_heads(const Tensor& x, std::int64_t n_heads);
Tensor merge_heads(const Tensor& x);

// "MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)"
// (3.2.2), with the h projections of each kind fused into one D x D Linear.
class MultiHeadAttention : public nn::CallableModule<MultiHeadAttention> {
 public:
  MultiHeadAttention(std::int64_t d_model, std::int64_t n_heads, double dropout = 0.0,
                     Generator& gen = default_generator());
  // query [B, Tq, D], key and value [B, Tk, D], blocked broadcastable to [B, H, Tq, Tk].
  // Returns context [B, Tq, D] and weights [B, H, Tq, Tk] (undefined unless KeepAttentionWeights lives).
  Attention forward(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& blocked = {});

  // The two halves of forward, for decoding with a cache: keys and values projected and split into heads
  // once ([B, Tk, D] -> [B, H, Tk, Dh]), then attended to by new queries as they come.
  Tensor key_heads(const Tensor& key);
  Tensor value_heads(const Tensor& value);
  Attention attend(const Tensor& query, const Tensor& k_heads, const Tensor& v_heads, const Tensor& blocked = {});
  // The attention of the heads q, k, v [B, H, T, Dh], with this module's dropout: flash_attention, or
  // scaled_dot_product_attention with its weights while KeepAttentionWeights lives.
  Attention heads_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& blocked = {});

  std::int64_t d_model, n_heads, d_head;
  double attn_dropout;
  std::shared_ptr<nn::Linear> w_q, w_k, w_v, w_o;  // each [D, D] with bias

 private:
  Generator* gen_;
};

}  // namespace stepformer::transformer
