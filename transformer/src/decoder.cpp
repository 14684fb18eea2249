// Chapter 06. Shape legend in transformer/config.h.
#include "transformer/decoder.h"

#include <fmt/format.h>

#include "autograd/errors.h"
#include "autograd/ops.h"

namespace stepformer::transformer {

DecoderLayer::DecoderLayer(const Config& cfg, Generator& gen) {
  self_attn =
      register_module("self_attn", std::make_shared<MultiHeadAttention>(cfg.d_model, cfg.n_heads, cfg.dropout, gen));
  cross_attn =
      register_module("cross_attn", std::make_shared<MultiHeadAttention>(cfg.d_model, cfg.n_heads, cfg.dropout, gen));
  ffn = register_module("ffn", std::make_shared<PositionwiseFeedForward>(cfg.d_model, cfg.d_ff, cfg.dropout, gen));
  norm_self = register_module("norm_self", std::make_shared<AddNorm>(cfg.d_model, cfg.dropout, cfg.pre_norm, gen));
  norm_cross = register_module("norm_cross", std::make_shared<AddNorm>(cfg.d_model, cfg.dropout, cfg.pre_norm, gen));
  norm_ffn = register_module("norm_ffn", std::make_shared<AddNorm>(cfg.d_model, cfg.dropout, cfg.pre_norm, gen));
}

DecoderLayer::Output DecoderLayer::forward(const Tensor& x, const Tensor& memory, const Tensor& tgt_blocked,
                                           const Tensor& src_blocked) {
  // EXERCISE 6.2: masked self-attention, cross-attention on memory, feed-forward
  Output out;
  // Masked self-attention: each target position sees itself and earlier positions only.
  const Tensor h1 = (*norm_self)(x, [&](const Tensor& t) {
    Attention a = (*self_attn)(t, t, t, tgt_blocked);
    out.self_weights = a.weights;  // [B, H, T, T]
    return a.context;
  });
  // Cross-attention: "the queries come from the previous decoder layer, and the memory keys and values
  // come from the output of the encoder" (3.2.3); PAD source tokens are blocked.
  const Tensor h2 = (*norm_cross)(h1, [&](const Tensor& t) {
    Attention a = (*cross_attn)(t, memory, memory, src_blocked);
    out.cross_weights = a.weights;  // [B, H, T, S]
    return a.context;
  });
  out.y = (*norm_ffn)(h2, [&](const Tensor& t) { return (*ffn)(t); });  // [B, T, D]
  return out;
  // END EXERCISE
}

Tensor DecoderLayer::step(const Tensor& x, DecoderCache& cache, std::size_t i, const Tensor& src_blocked) {
  const ScopeGuard scope = enter_scope();  // an entry point besides forward: errors name this layer
  // No self-attention mask: the cache holds only earlier positions (and this one), all of them visible.
  const Tensor h1 = (*norm_self)(x, [&](const Tensor& t) {
    const Tensor k = self_attn->key_heads(t), v = self_attn->value_heads(t);  // [B, H, 1, Dh]
    cache.self_k[i] = cache.self_k[i].defined() ? cat({cache.self_k[i], k}, 2) : k;
    cache.self_v[i] = cache.self_v[i].defined() ? cat({cache.self_v[i], v}, 2) : v;
    return self_attn->attend(t, cache.self_k[i], cache.self_v[i]).context;
  });
  const Tensor h2 = (*norm_cross)(h1, [&](const Tensor& t) {
    return cross_attn->attend(t, cache.cross_k[i], cache.cross_v[i], src_blocked).context;
  });
  return (*norm_ffn)(h2, [&](const Tensor& t) { return (*ffn)(t); });  // [B, 1, D]
}

Decoder::Decoder(const Config& c, Generator& gen) : cfg(c) {
  if (cfg.tgt_vocab < 1) throw ValueError(fmt::format("Decoder: tgt_vocab must be positive, got {}", cfg.tgt_vocab));
  embed = register_module("embed", std::make_shared<TransformerEmbedding>(cfg.tgt_vocab, cfg, gen));
  layers = register_module("layers", std::make_shared<nn::ModuleList<DecoderLayer>>());
  for (std::int64_t i = 0; i < cfg.n_layers; ++i) layers->push_back(std::make_shared<DecoderLayer>(cfg, gen));
  if (cfg.pre_norm) final_norm = register_module("final_norm", std::make_shared<nn::LayerNorm>(cfg.d_model));
}

namespace {
void check_encoded(const EncoderOutput& e) {
  const Tensor &m = e.memory, &b = e.src_blocked;
  if (!m.defined() || !b.defined() || m.dim() != 3 || b.dim() != 4 || b.size(0) != m.size(0) || b.size(1) != 1 ||
      b.size(2) != 1 || b.size(3) != m.size(1))
    throw ShapeError(fmt::format("Decoder: memory {} does not match the source mask {} ([B, S, D] and [B, 1, 1, S])",
                                 m.defined() ? to_string(m.shape()) : "(none)",
                                 b.defined() ? to_string(b.shape()) : "(none)"));
}
}  // namespace

DecoderOutput Decoder::forward(const Tensor& tgt_ids, const EncoderOutput& encoded) {
  check_encoded(encoded);
  const Tensor tgt_blocked = decoder_mask(tgt_ids, cfg.pad_id);  // [B, 1, T, T]
  DecoderOutput out{(*embed)(tgt_ids), {}, {}};                  // [B, T, D]
  for (auto& layer : *layers) {
    DecoderLayer::Output o = (*layer)(out.hidden, encoded.memory, tgt_blocked, encoded.src_blocked);
    out.hidden = o.y;
    out.self_attention.push_back(o.self_weights);
    out.cross_attention.push_back(o.cross_weights);
  }
  if (final_norm) out.hidden = (*final_norm)(out.hidden);
  return out;
}

Tensor Decoder::step(const Tensor& new_ids, const EncoderOutput& encoded, DecoderCache& cache) {
  const ScopeGuard scope = enter_scope();  // an entry point besides forward: errors name the decoder
  check_encoded(encoded);
  if (new_ids.dim() != 2 || new_ids.size(1) != 1)
    throw ShapeError(
        fmt::format("Decoder::step expected one new token per sequence [B, 1], got {}", to_string(new_ids.shape())));
  const std::size_t n = layers->size();
  if (cache.length == 0) {  // first step: project the source once per layer
    cache = DecoderCache{std::vector<Tensor>(n), std::vector<Tensor>(n), {}, {}, 0};
    for (std::size_t i = 0; i < n; ++i) {
      cache.cross_k.push_back((*layers)[i].cross_attn->key_heads(encoded.memory));
      cache.cross_v.push_back((*layers)[i].cross_attn->value_heads(encoded.memory));
    }
  }
  Tensor x = (*embed)(new_ids, cache.length);  // [B, 1, D] at position `length`
  for (std::size_t i = 0; i < n; ++i) x = (*layers)[i].step(x, cache, i, encoded.src_blocked);
  ++cache.length;
  return final_norm ? (*final_norm)(x) : x;
}

}  // namespace stepformer::transformer
