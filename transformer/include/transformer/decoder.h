#pragma once
// Chapter 06 — the decoder. Read docs/06_decoder.md.
#include <vector>

#include "transformer/encoder.h"

namespace stepformer::transformer {

// "In addition to the two sub-layers in each encoder layer, the decoder inserts a third sub-layer, which
// performs multi-head attention over the output of the encoder stack ... We also modify the self-attention
// sub-layer in the decoder stack to prevent positions from attending to subsequent positions" (3.1).
class DecoderLayer : public nn::Module {
 public:
  explicit DecoderLayer(const Config& cfg, Generator& gen = default_generator());
  struct Output {
    Tensor y;              // [B, T, D]
    Tensor self_weights;   // [B, H, T, T]
    Tensor cross_weights;  // [B, H, T, S]
  };
  // x [B, T, D], memory [B, S, D], tgt_blocked [B, 1, T, T] (pad | future), src_blocked [B, 1, 1, S].
  Output forward(const Tensor& x, const Tensor& memory, const Tensor& tgt_blocked, const Tensor& src_blocked);

  std::shared_ptr<MultiHeadAttention> self_attn, cross_attn;
  std::shared_ptr<PositionwiseFeedForward> ffn;
  std::shared_ptr<AddNorm> norm_self, norm_cross, norm_ffn;  // three, each its own (seed 003 shared one)
};

struct DecoderOutput {
  Tensor hidden;                        // [B, T, D]
  std::vector<Tensor> self_attention;   // per layer, [B, H, T, T]
  std::vector<Tensor> cross_attention;  // per layer, [B, H, T, S]
};

class Decoder : public nn::Module {
 public:
  explicit Decoder(const Config& cfg, Generator& gen = default_generator());
  // tgt ids [B, T] (shifted right: BOS first), memory [B, S, D], src ids [B, S] for the source pad mask.
  DecoderOutput forward(const Tensor& tgt_ids, const Tensor& memory, const Tensor& src_ids);

  Config cfg;
  std::shared_ptr<TransformerEmbedding> embed;
  std::shared_ptr<nn::ModuleList<DecoderLayer>> layers;
  std::shared_ptr<nn::LayerNorm> final_norm;  // pre-norm only
};

}  // namespace stepformer::transformer
