#pragma once
// Chapter 06 — the decoder. Read docs/06_decoder.md.
#include <vector>

#include "transformer/encoder.h"

namespace stepformer::transformer {

// What the decoder keeps while generating one token at a time (the KV cache): per layer, the
// self-attention keys and values of every position decoded so far, and the cross-attention keys and
// values of the source, projected once. Seed 001 (d2l; docs/seeds.md) caches each block's inputs instead; this caches
// the projections, which saves recomputing them too.
struct DecoderCache {
  std::vector<Tensor> self_k, self_v;    // per layer, [B, H, t, Dh], growing by one position per step
  std::vector<Tensor> cross_k, cross_v;  // per layer, [B, H, S, Dh]
  std::int64_t length = 0;               // positions decoded so far
};

// "In addition to the two sub-layers in each encoder layer, the decoder inserts a third sub-layer, which
// performs multi-head attention over the output of the encoder stack ... We also modify the self-attention
// sub-layer in the decoder stack to prevent positions from attending to subsequent positions" (3.1).
class DecoderLayer : public nn::CallableModule<DecoderLayer> {
 public:
  explicit DecoderLayer(const Config& cfg, Generator& gen = default_generator());
  struct Output {
    Tensor y;                        // [B, T, D]
    AttentionWeights self_weights;   // [B, H, T, T]
    AttentionWeights cross_weights;  // [B, H, T, S]
  };
  // x [B, T, D], memory [B, S, D], tgt_blocked [B, 1, T, T] (pad | future), src_blocked [B, 1, 1, S].
  Output forward(const Tensor& x, const Tensor& memory, const Tensor& tgt_blocked, const Tensor& src_blocked);
  // One new position x [B, 1, D] against the cached keys and values of layer `i`; appends its own.
  Tensor step(const Tensor& x, DecoderCache& cache, std::size_t i, const Tensor& src_blocked);

  std::shared_ptr<MultiHeadAttention> self_attn, cross_attn;
  std::shared_ptr<PositionwiseFeedForward> ffn;
  std::shared_ptr<AddNorm> norm_self, norm_cross, norm_ffn;  // three: each sublayer's output has its own scale
};

struct DecoderOutput {
  Tensor hidden;                                  // [B, T, D]
  std::vector<AttentionWeights> self_attention;   // per layer, [B, H, T, T]  (kept when need_weights is set:
  std::vector<AttentionWeights> cross_attention;  // per layer, [B, H, T, S]   keep_attention_weights)
};

class Decoder : public nn::CallableModule<Decoder> {
 public:
  explicit Decoder(const Config& cfg, Generator& gen = default_generator());
  // tgt ids [B, T] (shifted right: BOS first) and the encoder's output (memory [B, S, D] and its source
  // PAD mask [B, 1, 1, S]) -> hidden [B, T, D].
  DecoderOutput forward(const Tensor& tgt_ids, const EncoderOutput& encoded);
  // The next position only: new_ids [B, 1] at position cache.length -> hidden [B, 1, D], without recomputing
  // the earlier positions. Equal to the last row of forward() over the whole prefix when the prefix holds no
  // PAD, as every prefix that decoding builds: step takes no target mask (the cache holds only earlier
  // positions, all visible), while forward's mask also blocks PAD keys, so after an interior PAD they differ.
  Tensor step(const Tensor& new_ids, const EncoderOutput& encoded, DecoderCache& cache);

  Config cfg;
  std::shared_ptr<TransformerEmbedding> embed;
  std::shared_ptr<nn::ModuleList<DecoderLayer>> layers;
  std::shared_ptr<nn::LayerNorm> final_norm;  // pre-norm only
};

}  // namespace stepformer::transformer
