#pragma once
// Chapter 05 — the encoder. Read docs/05_encoder.md.
#include <vector>

#include "transformer/add_norm.h"
#include "transformer/attention.h"
#include "transformer/config.h"
#include "transformer/embedding.h"
#include "transformer/feed_forward.h"

namespace stepformer::transformer {

// "Each layer has two sub-layers. The first is a multi-head self-attention mechanism, and the second is a
// simple, position-wise fully connected feed-forward network" (3.1), each wrapped in its own AddNorm.
class EncoderLayer : public nn::CallableModule<EncoderLayer> {
 public:
  explicit EncoderLayer(const Config& cfg, Generator& gen = default_generator());
  // x [B, S, D], src_blocked [B, 1, 1, S] -> y [B, S, D], weights [B, H, S, S]
  Attention forward(const Tensor& x, const Tensor& src_blocked);

  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<PositionwiseFeedForward> ffn;
  std::shared_ptr<AddNorm> norm_attn, norm_ffn;
};

// What the encoder hands the decoder: the memory, and the mask of the source's PAD positions it built,
// which the decoder's cross-attention needs too (one mask, built once per source batch, also while
// decoding token by token).
struct EncoderOutput {
  Tensor memory;                            // [B, S, D]
  std::vector<AttentionWeights> attention;  // per layer, [B, H, S, S], kept when need_weights is set
  Tensor src_blocked;                       // bool [B, 1, 1, S], true at PAD keys
};

// "The encoder is composed of a stack of N = 6 identical layers" (3.1): identical in shape, separate in
// parameters — N separate constructions.
class Encoder : public nn::CallableModule<Encoder> {
 public:
  explicit Encoder(const Config& cfg, Generator& gen = default_generator());
  EncoderOutput forward(const Tensor& src_ids);  // int64 [B, S]; PAD keys are masked

  Config cfg;
  std::shared_ptr<TransformerEmbedding> embed;
  std::shared_ptr<nn::ModuleList<EncoderLayer>> layers;
  std::shared_ptr<nn::LayerNorm> final_norm;  // pre-norm only
};

}  // namespace stepformer::transformer
