#pragma once
// Chapter 12 — rotary position embeddings (RoPE). Read docs/12_modern_lm.md beside this file.
#include <cstdint>
#include <memory>
#include <string>

#include "autograd/tensor.h"
#include "transformer/device_position.h"

namespace stepformer::transformer {

// Which coordinates of a head are rotated together (RopePairing, autograd/backend.h): RoFormer (Su et al. 2021,
// equation 34) and Meta's Llama rotate adjacent pairs (x_0, x_1), (x_2, x_3), ...; GPT-NeoX and Hugging Face's
// Llama rotate (x_i, x_{i+Dh/2}). The two are different functions of the same weights (a fixed permutation of each
// head's coordinates maps one onto the other), so weights trained with one are wrong under the other. stepformer
// uses `half` by default; tests/transformer/test_ch12_blocks.cpp shows the two differ.
using stepformer::RopePairing;
RopePairing rope_pairing_from_name(const std::string& name);  // "half" | "adjacent"; ValueError otherwise

// "f(x, m) = R^d_{Theta,m} W x" (RoFormer, equation 14): coordinate pair i of the token at position m is
// rotated by the angle m theta_i, theta_i = base^(-2i/Dh). Then q_m . k_n depends on m - n only: attention
// sees relative positions, and nothing is added to the embeddings. x [B, H, T, Dh] (Dh even) holds the tokens
// at positions start .. start + T - 1 (start > 0 for a step after a KV cache's tokens). The rotation itself is
// the fused op rotate_pairs (autograd/ops.h); this function builds its angle tables.
Tensor rope(const Tensor& x, std::int64_t start, RopePairing pairing = RopePairing::half, double base = 10000.0);

// Where a step's first token is: `start`, a number the host knows; or, for a decode step recorded once as a device
// graph and replayed at each next position, `on_device`, read there at each replay (`start` is then where it stood
// when the host ran the step).
struct Position {
  std::int64_t start = 0;
  std::shared_ptr<DevicePosition> on_device;
};
// rope(x, at.start) for a host position. At a device position, x holds one token (T = 1): its cos and sin row is
// gathered there, once a step, from a table of every position below the limit: the same values as the host's
// tables (built in float64, then rounded to x's dtype).
Tensor rope(const Tensor& x, const Position& at, RopePairing pairing = RopePairing::half, double base = 10000.0);

}  // namespace stepformer::transformer
