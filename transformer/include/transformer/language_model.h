#pragma once
// Chapter 12 — a decoder-only language model built from chapters 01-04's pieces, with one switch per change
// that separates the 2017 Transformer's block from a Llama-style one. Read docs/12_modern_lm.md.
#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "transformer/grouped_attention.h"
#include "transformer/rms_norm.h"
#include "transformer/swiglu.h"

namespace stepformer::transformer {

enum class PositionKind { sinusoidal, learned, rope };

// Shape legend as in config.h; Hkv key/value heads. Each switch is one change of chapter 12.
struct LMConfig {
  std::int64_t vocab = 0;
  std::int64_t n_layers = 4;
  std::int64_t d_model = 256;
  std::int64_t n_heads = 8;
  std::int64_t n_kv_heads = 8;  // n_heads: multi-head; 1: multi-query; between: grouped-query
  std::int64_t d_ff = 1024;     // the two-matrix FFN's hidden size; SwiGLU takes 2/3 of it (equal parameters)
  std::int64_t max_len = 256;   // the longest context (the tables of sinusoidal and learned positions)
  bool pre_norm = false;        // false: post-norm, LayerNorm(x + Sublayer(x)), the 2017 way
  NormKind norm = NormKind::layer;
  FeedForwardKind feed_forward = FeedForwardKind::relu;
  PositionKind positions = PositionKind::sinusoidal;
  RopePairing rope_pairing = RopePairing::half;
  bool bias = true;             // biases in the attention projections (2017: yes; Llama: no)
  bool tie_embeddings = false;  // the output projection is the token embedding (Press & Wolf 2017)
};

// The 2017 block as a decoder-only model (post-norm, LayerNorm, ReLU, sinusoidal positions, multi-head
// attention with biases), and the Llama-style block (Touvron et al. 2023: pre-norm, RMSNorm, SwiGLU, RoPE,
// grouped-query attention with n_heads / 4 key/value heads, no biases, tied embeddings as in the small
// Llama-likes). Same sizes, so the same parameter count up to the norms, biases and shared heads.
LMConfig block_2017(std::int64_t vocab);
LMConfig llama_block(std::int64_t vocab);
// Reads --block's names and the single-change names: "2017", "llama", or "2017+pre-norm", "2017+rmsnorm",
// "2017+swiglu", "2017+gelu", "2017+rope", "2017+learned", "2017+gqa", "2017+mqa", "2017+tied". ValueError otherwise.
LMConfig lm_config_from_name(const std::string& name, std::int64_t vocab);
std::vector<std::string> lm_config_names();  // every name lm_config_from_name accepts

// One block: attention then feed-forward, each with a residual connection and a norm placed before (pre) or
// after (post) it: pre x + f(norm(x)); post norm(x + f(x)).
class LMBlock : public nn::CallableModule<LMBlock> {
 public:
  LMBlock(const LMConfig& cfg, Generator& gen);
  Tensor forward(const Tensor& x, LayerCache* cache = nullptr);  // [B, T, D] -> [B, T, D]

  bool pre_norm;
  std::shared_ptr<nn::UnaryModule> attention_norm, feed_forward_norm, feed_forward;
  std::shared_ptr<GroupedQueryAttention> attention;
};

// Every layer's cache for one batch of sequences being generated.
struct KVCache {
  std::vector<LayerCache> layers;
  std::shared_ptr<DevicePosition> position;  // once keep_position_on_device() has run: the next token's position
  std::int64_t length() const { return layers.empty() ? 0 : layers[0].length(); }
  // From here on the position lives on `device` (LayerCache): every layer reads it there, and LanguageModel::forward
  // advances it there after each step of one token. A step recorded as a device graph then runs at the next position
  // at each replay, as generate does. Call it after the prompt (its tokens' positions are the host's).
  void keep_position_on_device(Device device);
};
// Bytes the cache holds per token of one sequence: keys and values, Hkv heads of Dh, every layer.
std::int64_t kv_cache_bytes_per_token(const LMConfig& cfg, std::int64_t bytes_per_element = 4);

class LanguageModel : public nn::CallableModule<LanguageModel> {
 public:
  explicit LanguageModel(const LMConfig& cfg, Generator& gen = default_generator());
  // ids int64 [B, T] -> logits [B, T, V]: position t predicts token t + 1. With a cache, ids are the tokens
  // after the cache's (positions cache.length() .., or one token at its device position, which then advances by
  // one), and the cache grows by T.
  Tensor forward(const Tensor& ids, KVCache* cache = nullptr);
  // A cache for sequences of at most `capacity` tokens (prompt and generated together).
  KVCache make_cache(std::int64_t capacity) const {
    return KVCache{std::vector<LayerCache>(static_cast<std::size_t>(cfg.n_layers), LayerCache(capacity)), nullptr};
  }

  LMConfig cfg;
  std::shared_ptr<nn::Embedding> tokens;     // [V, D]
  std::shared_ptr<nn::Embedding> positions;  // [max_len, D], learned positions only
  Tensor sinusoids;                          // buffer [max_len, D], sinusoidal positions only
  std::shared_ptr<nn::ModuleList<LMBlock>> blocks;
  std::shared_ptr<nn::UnaryModule> final_norm;  // pre-norm only: the last block's output is not normalised
  std::shared_ptr<nn::Linear> lm_head;          // [V, D], or undefined when tied to `tokens`
};

}  // namespace stepformer::transformer
