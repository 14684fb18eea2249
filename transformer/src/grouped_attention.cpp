// Chapter 12. Shape legend in transformer/config.h; Hkv key/value heads.
#include "transformer/grouped_attention.h"

#include <fmt/format.h>

#include "autograd/autocast.h"
#include "autograd/errors.h"
#include "autograd/ops.h"
#include "transformer/attention.h"

namespace stepformer::transformer {

Tensor repeat_kv(const Tensor& kv, std::int64_t n_heads) {
  if (kv.dim() != 4 || n_heads % kv.size(1) != 0)
    throw ShapeError(fmt::format("repeat_kv: {} heads cannot share the {} heads of {}", n_heads,
                                 kv.dim() == 4 ? kv.size(1) : 0, to_string(kv.shape())));
  const std::int64_t B = kv.size(0), Hkv = kv.size(1), T = kv.size(2), Dh = kv.size(3), group = n_heads / Hkv;
  if (group == 1) return kv;
  // EXERCISE 12.4: [B, Hkv, T, Dh] -> [B, H, T, Dh], query head h reading kv head h / group.
  const Tensor repeated = expand(unsqueeze(kv, 2), {B, Hkv, group, T, Dh});  // stride 0 over the group: no copy yet
  return reshape(repeated, {B, n_heads, T, Dh});                             // heads j * group .. j * group + group - 1
  // END EXERCISE
}

LayerCache::LayerCache(std::int64_t capacity) : capacity_(capacity) {
  if (capacity < 1)
    throw ValueError(fmt::format("LayerCache: the capacity must be at least 1 token, got {}", capacity));
}

Position LayerCache::position() const { return {length_, position_}; }

void LayerCache::read_position_from(std::shared_ptr<DevicePosition> position) {
  if (!position || position->limit() != capacity_)
    throw ValueError(fmt::format("LayerCache: a device position of limit {} for a cache of capacity {}",
                                 position ? position->limit() : 0, capacity_));
  position_ = std::move(position);
}

void LayerCache::append(const Tensor& k, const Tensor& v) {
  if (k.dim() != 4 || v.shape() != k.shape() ||
      (k_.defined() && (k.size(0) != k_.size(0) || k.size(1) != k_.size(1) || k.size(3) != k_.size(3))))
    throw ShapeError(fmt::format("LayerCache: keys {} and values {} do not fit a cache of {}", to_string(k.shape()),
                                 to_string(v.shape()), k_.defined() ? to_string(k_.shape()) : "[B, Hkv, T, Dh]"));
  const std::int64_t T = k.size(2);
  if (length_ + T > capacity_)
    throw ShapeError(
        fmt::format("LayerCache: {} more tokens do not fit after {}: its capacity is {}", T, length_, capacity_));
  if (position_ && T != 1)
    throw ShapeError(fmt::format("LayerCache: at a device position a step appends one token, got {}", T));
  if (!k_.defined()) {
    // Stored as attention multiplies them: under bfloat16 autocast, float32 keys are kept in bfloat16 (as PyTorch's
    // autocast Linear returns them), half the bytes, and attention converts no cache at each token. Zero-filled: rows
    // a device position has not reached are read (blocked) by attention, and a blocked NaN would still reach the sum.
    const bool narrower = autocast_dtype() == DType::bfloat16 && k.dtype() == DType::float32;
    const Shape buffer{k.size(0), k.size(1), capacity_, k.size(3)};
    k_ = zeros(buffer, {narrower ? DType::bfloat16 : k.dtype(), k.device()});
    v_ = zeros(buffer, {narrower ? DType::bfloat16 : v.dtype(), v.device()});
  }
  if (position_) {
    // The row at the device position, which the host does not read: one kernel a buffer writes it there.
    index_copy_(k_, 2, position_->tensor(), k.to(k_.dtype()));
    index_copy_(v_, 2, position_->tensor(), v.to(v_.dtype()));
  } else {
    Tensor k_rows = narrow(k_, 2, length_, T), v_rows = narrow(v_, 2, length_, T);
    copy_(k_rows, k);
    copy_(v_rows, v);
  }
  length_ += T;
}

Tensor LayerCache::keys() const { return k_.defined() ? narrow(k_, 2, 0, position_ ? capacity_ : length_) : Tensor(); }
Tensor LayerCache::values() const {
  return v_.defined() ? narrow(v_, 2, 0, position_ ? capacity_ : length_) : Tensor();
}
Tensor LayerCache::blocked() const { return position_ ? view(position_->past(), {1, capacity_}) : Tensor(); }

GroupedQueryAttention::GroupedQueryAttention(const AttentionShape& s, Generator& gen)
    : shape(s), d_head(s.n_heads > 0 ? s.d_model / s.n_heads : 0) {
  if (s.n_heads < 1 || s.n_kv_heads < 1 || s.d_model % s.n_heads != 0 || s.n_heads % s.n_kv_heads != 0)
    throw ValueError(
        fmt::format("GroupedQueryAttention: d_model {} must divide into n_heads {}, and n_heads into "
                    "n_kv_heads {}",
                    s.d_model, s.n_heads, s.n_kv_heads));
  if (s.rope && d_head % 2 != 0)
    throw ValueError(fmt::format("GroupedQueryAttention: RoPE needs an even head size, got {}", d_head));
  const std::int64_t kv_width = s.n_kv_heads * d_head;
  w_q = register_module("w_q", std::make_shared<nn::Linear>(s.d_model, s.d_model, s.bias, gen));
  w_k = register_module("w_k", std::make_shared<nn::Linear>(s.d_model, kv_width, s.bias, gen));
  w_v = register_module("w_v", std::make_shared<nn::Linear>(s.d_model, kv_width, s.bias, gen));
  w_o = register_module("w_o", std::make_shared<nn::Linear>(s.d_model, s.d_model, s.bias, gen));
}

Tensor GroupedQueryAttention::forward(const Tensor& x, LayerCache* cache) {
  if (x.dim() != 3 || x.size(2) != shape.d_model)
    throw ShapeError(
        fmt::format("GroupedQueryAttention expected [B, T, {}], got {}", shape.d_model, to_string(x.shape())));
  const std::int64_t T = x.size(1);
  Tensor q = split_heads((*w_q)(x), shape.n_heads);     // [B, H, T, Dh]
  Tensor k = split_heads((*w_k)(x), shape.n_kv_heads);  // [B, Hkv, T, Dh]
  Tensor v = split_heads((*w_v)(x), shape.n_kv_heads);  // [B, Hkv, T, Dh]
  Position at;                                          // where x's first token is: 0 without a cache
  // EXERCISE 12.6: at = the cache's position; RoPE from there; append k, v to it; attend over all it holds.
  if (cache) at = cache->position();
  if (shape.rope) {
    q = rope(q, at, shape.pairing);
    k = rope(k, at, shape.pairing);
  }
  if (cache) {
    cache->append(k, v);
    k = cache->keys();  // [B, Hkv, at.start + T, Dh]
    v = cache->values();
  }
  // END EXERCISE
  // Query i (at position start + i) may not see key j > start + i. Without a cache that is flash_attention's
  // own causal mask; one new token sees the whole cache; several new tokens need the mask shifted by start. At a
  // device position the cache's rows past it are blocked. flash_attention shares each key/value head among its
  // H / Hkv query heads itself, as repeat_kv lays them out, reading them in place.
  const Tensor blocked = at.on_device            ? cache->blocked()
                         : at.start > 0 && T > 1 ? subsequent_mask(T, x.device(), at.start)
                                                 : Tensor();
  const bool causal = at.start == 0 && !at.on_device;
  const Tensor context = flash_attention(q, k, v, blocked, attention_scale(d_head), causal);  // [B, H, T, Dh]
  return (*w_o)(merge_heads(context));                                                        // [B, T, D]
}

}  // namespace stepformer::transformer
