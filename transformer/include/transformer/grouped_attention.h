#pragma once
// Chapter 12 — causal self-attention for a decoder-only model: grouped-query attention (multi-head and
// multi-query attention are its two ends), rotary positions, and the KV cache. Read docs/12_modern_lm.md.
#include <memory>

#include "nn/layers.h"
#include "transformer/rope.h"

namespace stepformer::transformer {

// Query head h reads key/value head h / (H / Hkv): "GQA divides query heads into G groups, each of which shares
// a single key head and value head" (Ainslie et al. 2023), groups of consecutive heads. [B, Hkv, T, Dh] ->
// [B, H, T, Dh]. H = Hkv is multi-head attention (the identity here), Hkv = 1 multi-query attention
// (Shazeer 2019).
Tensor repeat_kv(const Tensor& kv, std::int64_t n_heads);

// What one layer has seen while generating: the keys (RoPE applied) and values of the tokens so far. Only the Hkv
// shared heads are stored: the cache is H / Hkv times smaller than multi-head attention's. Its buffers
// [B, Hkv, capacity, Dh] are allocated once, zero-filled, at the first append, for the longest sequence it will hold
// (as Hugging Face's StaticCache): a token's keys are written in place, and attention reads the first length() rows
// where they lie (flash_attention takes such views), so generating allocates nothing that grows with the sequence.
//
// Its position (where the next token goes) is length(), kept by the host; or, after read_position_from(), a
// DevicePosition that the model advances on the device after each step (KVCache::keep_position_on_device): a step
// recorded once as a device graph then writes and reads at the next position at each replay (docs/09_cuda.md,
// "Graphs"). The host cannot know how many rows that position has filled, so attention then reads all capacity()
// rows, those past the position blocked (blocked()).
class LayerCache {
 public:
  explicit LayerCache(std::int64_t capacity);
  std::int64_t capacity() const { return capacity_; }
  std::int64_t length() const { return length_; }  // the tokens appended by the host's calls (not by replays)
  Position position() const;                       // where the next tokens go
  // Reads the position from `position` (its limit this cache's capacity) from here on: each token is then written
  // where it says, one a step.
  void read_position_from(std::shared_ptr<DevicePosition> position);
  // k, v [B, Hkv, T, Dh] stored at position(). ShapeError past the capacity, for another B, Hkv or Dh, or for T > 1
  // at a device position.
  void append(const Tensor& k, const Tensor& v);
  Tensor keys() const;    // [B, Hkv, length(), Dh], a view of the buffer; at a device position all capacity() rows
  Tensor values() const;  // [B, Hkv, length(), Dh]; likewise
  // The keys of keys() the newest token may not see: [1, capacity] true past the device position; undefined at a
  // host position (keys() then holds only the tokens so far).
  Tensor blocked() const;

 private:
  std::int64_t capacity_, length_ = 0;
  Tensor k_, v_;                              // [B, Hkv, capacity, Dh], undefined until the first append
  std::shared_ptr<DevicePosition> position_;  // after read_position_from
};

struct AttentionShape {
  std::int64_t d_model = 0, n_heads = 1, n_kv_heads = 1;
  bool bias = false;  // the 2017 model's projections have biases; Llama's have none
  bool rope = false;  // rotate queries and keys (rope.h) by their positions
  RopePairing pairing = RopePairing::half;
};

// Causal self-attention: "MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O" (Vaswani et al. 2017, 3.2.2),
// with Hkv key/value heads shared by groups of H / Hkv query heads. No dropout (chapter 12's models train without
// it, as Llama does). flash_attention computes every head.
class GroupedQueryAttention : public nn::CallableModule<GroupedQueryAttention> {
 public:
  explicit GroupedQueryAttention(const AttentionShape& shape, Generator& gen = default_generator());
  // x [B, T, D] -> [B, T, D]; token t sees tokens 0..t. With a cache, x holds the tokens that follow the
  // cache's: they see those too, and are appended to it.
  Tensor forward(const Tensor& x, LayerCache* cache = nullptr);

  AttentionShape shape;
  std::int64_t d_head;
  std::shared_ptr<nn::Linear> w_q;       // [H Dh, D]
  std::shared_ptr<nn::Linear> w_k, w_v;  // [Hkv Dh, D] each
  std::shared_ptr<nn::Linear> w_o;       // [D, H Dh]
};

}  // namespace stepformer::transformer
