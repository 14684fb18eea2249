// Chapter 12. Shape legend in transformer/config.h.
#include "transformer/language_model.h"

#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "autograd/errors.h"
#include "autograd/ops.h"
#include "nn/init.h"
#include "transformer/embedding.h"

namespace stepformer::transformer {

LMConfig block_2017(std::int64_t vocab) {
  LMConfig c;
  c.vocab = vocab;
  return c;
}

LMConfig llama_block(std::int64_t vocab) {
  LMConfig c = block_2017(vocab);
  c.pre_norm = true;
  c.norm = NormKind::rms;
  c.feed_forward = FeedForwardKind::swiglu;
  c.positions = PositionKind::rope;
  c.n_kv_heads = c.n_heads / 4;
  c.bias = false;
  c.tie_embeddings = true;
  return c;
}

namespace {
struct Change {
  const char* name;
  void (*apply)(LMConfig&);
};
// Each of chapter 12's changes, alone, on top of the 2017 block.
const Change kChanges[] = {
    {"pre-norm", [](LMConfig& c) { c.pre_norm = true; }},
    {"rmsnorm", [](LMConfig& c) { c.norm = NormKind::rms; }},
    {"gelu", [](LMConfig& c) { c.feed_forward = FeedForwardKind::gelu; }},
    {"swiglu", [](LMConfig& c) { c.feed_forward = FeedForwardKind::swiglu; }},
    {"learned", [](LMConfig& c) { c.positions = PositionKind::learned; }},
    {"rope", [](LMConfig& c) { c.positions = PositionKind::rope; }},
    {"gqa", [](LMConfig& c) { c.n_kv_heads = c.n_heads / 4; }},
    {"mqa", [](LMConfig& c) { c.n_kv_heads = 1; }},
    {"tied", [](LMConfig& c) { c.tie_embeddings = true; }},
};
}  // namespace

std::vector<std::string> lm_config_names() {
  std::vector<std::string> names{"2017", "llama"};
  for (const Change& c : kChanges) names.push_back(std::string("2017+") + c.name);
  return names;
}

LMConfig lm_config_from_name(const std::string& name, std::int64_t vocab) {
  if (name == "2017") return block_2017(vocab);
  if (name == "llama") return llama_block(vocab);
  for (const Change& c : kChanges)
    if (name == std::string("2017+") + c.name) {
      LMConfig cfg = block_2017(vocab);
      c.apply(cfg);
      return cfg;
    }
  throw ValueError(fmt::format("unknown block '{}': expected one of {}", name, fmt::join(lm_config_names(), ", ")));
}

LMBlock::LMBlock(const LMConfig& cfg, Generator& gen) : pre_norm(cfg.pre_norm) {
  const AttentionShape shape{
      cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.bias, cfg.positions == PositionKind::rope, cfg.rope_pairing};
  attention = register_module("attention", std::make_shared<GroupedQueryAttention>(shape, gen));
  attention_norm = register_module("attention_norm", make_norm(cfg.norm, cfg.d_model));
  feed_forward = register_module("feed_forward", make_feed_forward(cfg.feed_forward, cfg.d_model, cfg.d_ff, gen));
  feed_forward_norm = register_module("feed_forward_norm", make_norm(cfg.norm, cfg.d_model));
}

// Each residual sum and the norm that reads it are one call, add_then_norm: one pass over the rows for RMSNorm.
Tensor LMBlock::forward(const Tensor& x, LayerCache* cache) {
  if (pre_norm) {
    const Tensor a = (*attention)((*attention_norm)(x), cache);
    const auto [h, normed] = add_then_norm(*feed_forward_norm, x, a);  // h = x + Attention(Norm(x)), and Norm(h)
    return h + (*feed_forward)(normed);                                // h + FFN(Norm(h))
  }
  const Tensor h = add_then_norm(*attention_norm, x, (*attention)(x, cache)).normed;  // Norm(x + Attention(x))
  return add_then_norm(*feed_forward_norm, h, (*feed_forward)(h)).normed;             // Norm(h + FFN(h))
}

std::int64_t kv_cache_bytes_per_token(const LMConfig& cfg, std::int64_t bytes_per_element) {
  return 2 * cfg.n_layers * cfg.n_kv_heads * (cfg.d_model / cfg.n_heads) * bytes_per_element;
}

void KVCache::keep_position_on_device(Device device) {
  if (layers.empty()) throw ValueError("KVCache: a cache of no layers has no position to keep");
  position = std::make_shared<DevicePosition>(length(), layers[0].capacity(), device);
  for (LayerCache& layer : layers) {
    if (layer.length() != length())
      throw ValueError("KVCache: every layer's cache must hold as many tokens to share a device position");
    layer.read_position_from(position);
  }
}

LanguageModel::LanguageModel(const LMConfig& c, Generator& gen) : cfg(c) {
  if (c.vocab < 1 || c.n_layers < 1 || c.max_len < 1)
    throw ValueError(fmt::format("LanguageModel: vocab {}, n_layers {} and max_len {} must be positive", c.vocab,
                                 c.n_layers, c.max_len));
  // Token vectors N(0, 1/D), read times sqrt(D) (as 2017's section 3.4 and Gemma): unit-size inputs. Tied, they
  // start at N(0, 0.02^2), GPT-2's init for its tied matrix: read back as the output projection, N(0, 1/D) vectors
  // would give each position's own input token a logit near sqrt(D), an untrained loss near 16 nats at D 256
  // where ln V is 7.6 (docs/12_modern_lm.md, "Tying the embeddings").
  tokens = register_module("tokens", std::make_shared<nn::Embedding>(c.vocab, c.d_model, std::nullopt, gen));
  const double token_std = c.tie_embeddings ? 0.02 : 1.0 / std::sqrt(static_cast<double>(c.d_model));
  nn::init::normal_(tokens->weight, 0.0, token_std, gen);
  if (c.positions == PositionKind::learned) {
    positions = register_module("positions", std::make_shared<nn::Embedding>(c.max_len, c.d_model, std::nullopt, gen));
    nn::init::normal_(positions->weight, 0.0, 0.02, gen);  // GPT-2's
  }
  if (c.positions == PositionKind::sinusoidal)
    sinusoids = register_buffer("sinusoids", sinusoidal_table(c.max_len, c.d_model));
  blocks = register_module("blocks", std::make_shared<nn::ModuleList<LMBlock>>());
  for (std::int64_t i = 0; i < c.n_layers; ++i) blocks->push_back(std::make_shared<LMBlock>(c, gen));
  if (c.pre_norm) final_norm = register_module("final_norm", make_norm(c.norm, c.d_model));
  if (!c.tie_embeddings)
    lm_head = register_module("lm_head", std::make_shared<nn::Linear>(c.d_model, c.vocab, false, gen));
}

Tensor LanguageModel::forward(const Tensor& ids, KVCache* cache) {
  if (ids.dim() != 2 || ids.dtype() != DType::int64)
    throw ShapeError(fmt::format("LanguageModel expected int64 token ids [B, T], got {} {}", to_string(ids.shape()),
                                 dtype_name(ids.dtype())));
  const std::int64_t T = ids.size(1), start = cache ? cache->length() : 0;
  if (cache && static_cast<std::int64_t>(cache->layers.size()) != cfg.n_layers)
    throw ValueError(
        fmt::format("LanguageModel: a cache of {} layers for a model of {}", cache->layers.size(), cfg.n_layers));
  // At a device position the host knows only that it stays below the cache's capacity.
  const bool on_device = cache && cache->position;
  const std::int64_t last = on_device ? cache->layers[0].capacity() - 1 : start + T - 1;
  if (cfg.positions != PositionKind::rope && last >= cfg.max_len)
    throw ShapeError(fmt::format("LanguageModel: position {} is past max_len {}", last, cfg.max_len));
  // The table's rows of the step's positions: a narrow at a host position, a gather at a device position (checked
  // against the cache's capacity, past which the device reports an index error).
  const auto rows_at = [&](const Tensor& table) {
    return on_device ? cache->position->row_of(table, table.dtype()) : narrow(table, 0, start, T);
  };
  Tensor x = (*tokens)(ids)*std::sqrt(static_cast<double>(cfg.d_model));  // [B, T, D]
  if (cfg.positions == PositionKind::sinusoidal) x = x + rows_at(sinusoids);
  if (cfg.positions == PositionKind::learned) x = x + rows_at(positions->weight);
  for (std::int64_t i = 0; i < cfg.n_layers; ++i)
    x = (*blocks)[static_cast<std::size_t>(i)](x, cache ? &cache->layers[static_cast<std::size_t>(i)] : nullptr);
  if (final_norm) x = (*final_norm)(x);
  if (on_device) cache->position->advance();
  // Tied: the logits are x E^T, the same matrix read the other way (Press & Wolf 2017).
  return lm_head ? (*lm_head)(x) : matmul(x, transpose(tokens->weight, 0, 1));  // [B, T, V]
}

}  // namespace stepformer::transformer
