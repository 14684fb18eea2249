// Chapter 05. Shape legend in transformer/config.h.
#include "transformer/encoder.h"

#include <fmt/format.h>

#include "autograd/errors.h"
#include "autograd/ops.h"

namespace stepformer::transformer {

EncoderLayer::EncoderLayer(const Config& cfg, Generator& gen) {
  self_attn =
      register_module("self_attn", std::make_shared<MultiHeadAttention>(cfg.d_model, cfg.n_heads, cfg.dropout, gen));
  ffn = register_module("ffn", std::make_shared<PositionwiseFeedForward>(cfg.d_model, cfg.d_ff, cfg.dropout, gen));
  norm_attn = register_module("norm_attn", std::make_shared<AddNorm>(cfg.d_model, cfg.dropout, cfg.pre_norm, gen));
  norm_ffn = register_module("norm_ffn", std::make_shared<AddNorm>(cfg.d_model, cfg.dropout, cfg.pre_norm, gen));
}

Attention EncoderLayer::forward(const Tensor& x, const Tensor& src_blocked) {
  // EXERCISE 5.1: self-attention then feed-forward, each wrapped in add & norm.
  AttentionWeights weights;  // [B, H, S, S] when kept, returned, never stored on the module
  const Tensor h = (*norm_attn)(x, [&](const Tensor& t) {
    Attention a = (*self_attn)(t, t, t, src_blocked);  // queries, keys and values all from x
    weights = a.weights;
    return a.context;
  });                                                                           // [B, S, D]
  const Tensor y = (*norm_ffn)(h, [&](const Tensor& t) { return (*ffn)(t); });  // [B, S, D]
  return {y, weights};
  // END EXERCISE
}

Encoder::Encoder(const Config& c, Generator& gen) : cfg(c) {
  if (cfg.src_vocab < 1) throw ValueError(fmt::format("Encoder: src_vocab must be positive, got {}", cfg.src_vocab));
  embed = register_module("embed", std::make_shared<TransformerEmbedding>(cfg.src_vocab, cfg, gen));
  layers = register_module("layers", std::make_shared<nn::ModuleList<EncoderLayer>>());
  for (std::int64_t i = 0; i < cfg.n_layers; ++i) layers->push_back(std::make_shared<EncoderLayer>(cfg, gen));
  if (cfg.pre_norm) final_norm = register_module("final_norm", std::make_shared<nn::LayerNorm>(cfg.d_model));
}

EncoderOutput Encoder::forward(const Tensor& src_ids) {
  // EXERCISE 5.2: embed, run every layer with the PAD mask, then the final norm
  EncoderOutput out{(*embed)(src_ids), {}, pad_mask(src_ids, cfg.pad_id)};  // [B, S, D], -, [B, 1, 1, S]
  for (auto& layer : *layers) {
    Attention a = (*layer)(out.memory, out.src_blocked);
    out.memory = a.context;
    out.attention.push_back(a.weights);
  }
  if (final_norm) out.memory = (*final_norm)(out.memory);
  return out;
  // END EXERCISE
}

}  // namespace stepformer::transformer
