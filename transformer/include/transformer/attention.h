#pragma once
// Chapter 02 — attention and masks. Read docs/02_attention.md beside this file.
//
// Masks are boolean and mark what is BLOCKED: true = "this query may not look at this key". They
// broadcast against the scores [B, H, Tq, Tk], so a pad mask is [B, 1, 1, Tk] and the subsequent mask
// [1, 1, T, T].
#include "autograd/random.h"
#include "nn/layers.h"

namespace stepformer::transformer {

// The weights [B, H, Tq, Tk] of one attention, when the path that computed it kept them: chapter 02's composite
// keeps them, flash_attention stores none. Reading them where none were kept is an error that says how to get
// them, never an undefined tensor passed on; passing them along (a layer returning its attention's) is free.
class AttentionWeights {
 public:
  AttentionWeights() = default;
  AttentionWeights(Tensor weights) : weights_(std::move(weights)) {}  // NOLINT(google-explicit-constructor)
  bool kept() const { return weights_.defined(); }
  const Tensor& tensor() const;  // ValueError when none were kept

 private:
  Tensor weights_;
};

struct Attention {
  Tensor context;            // [B, H, Tq, Dh] (scaled_dot_product_attention) or [B, Tq, D] (MultiHeadAttention)
  AttentionWeights weights;  // [B, H, Tq, Tk]: each row sums to 1 over the keys it may see, blocked keys exactly 0
};

// "We suspect that for large values of d_k, the dot products grow large in magnitude, pushing the softmax
// function into regions where it has extremely small gradients. To counteract this effect, we scale the dot
// products by 1/sqrt(d_k)" (3.2.1). Every attention here, composite or flash, scales by this.
double attention_scale(std::int64_t d_k);

// "Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V" (section 3.2.1, equation 1). Blocked positions get
// -inf before the softmax, so their weight is exactly 0. `dropout` (on the weights, as the annotated
// Transformer and torch.nn.MultiheadAttention) is applied only when `training`.
Attention scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& blocked = {},
                                       double dropout = 0.0, bool training = false,
                                       Generator& gen = default_generator());

// Keys that are PAD: ids [B, S] -> bool [B, 1, 1, S].
Tensor pad_mask(const Tensor& ids, std::int64_t pad_id);
// "masking out (setting to -inf) all values in the input of the softmax which correspond to illegal
// connections" (3.2.3): a position may not see the positions after it. T queries at positions start ..
// start + T - 1 against keys 0 .. start + T - 1 -> bool [1, 1, T, start + T]: query i blocks key j > start + i.
// start = 0 is the square mask of training; start > 0 puts the queries after `start` cached keys (chapter 12's
// KV cache). flash_attention's `causal` flag is the start = 0 mask, computed inside the kernel.
Tensor subsequent_mask(std::int64_t T, Device device = default_device(), std::int64_t start = 0);
// The decoder's self-attention mask: PAD keys or future positions. tgt ids [B, T] -> bool [B, 1, T, T].
Tensor decoder_mask(const Tensor& tgt_ids, std::int64_t pad_id);

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
  // Returns context [B, Tq, D] and, when need_weights is set, the weights [B, H, Tq, Tk].
  Attention forward(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& blocked = {});

  // The two halves of forward, for decoding with a cache: keys and values projected and split into heads
  // once ([B, Tk, D] -> [B, H, Tk, Dh]), then attended to by new queries as they come.
  Tensor key_heads(const Tensor& key);
  Tensor value_heads(const Tensor& value);
  Attention attend(const Tensor& query, const Tensor& k_heads, const Tensor& v_heads, const Tensor& blocked = {});
  // The attention of the heads q, k, v [B, H, T, Dh], with this module's dropout: flash_attention, or
  // scaled_dot_product_attention and its weights when need_weights is set.
  Attention heads_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& blocked = {});

  std::int64_t d_model, n_heads, d_head;
  double attn_dropout;
  // Which kernel runs: false (the default) calls flash_attention, which gives the same context without ever
  // storing the [B, H, Tq, Tk] weights, so Attention::weights holds none; true runs chapter 02's composite and
  // returns them (the demos that draw them, the tests that read them). PyTorch's need_weights, with the
  // default its TransformerEncoderLayer passes (False) rather than MultiheadAttention.forward's (True).
  bool need_weights = false;
  std::shared_ptr<nn::Linear> w_q, w_k, w_v, w_o;  // each [D, D] with bias

 private:
  Generator* gen_;
};

// Sets need_weights on every MultiHeadAttention inside `model` (itself included), for a program that reads the
// weights of whole encoders and decoders. ValueError when `model` holds none.
void keep_attention_weights(nn::Module& model, bool keep = true);

}  // namespace stepformer::transformer
