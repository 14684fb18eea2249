#pragma once
// Chapter 07 — how much arithmetic a step is: the model FLOPs of the matrix products, from the config
// alone, for model FLOPs utilisation (MFU = model FLOPs per second / the machine's peak, as llm.c and the
// PaLM paper (Chowdhery et al. 2022, appendix B) report it).
//
// Counted: every matrix product, 2 FLOPs per multiply-add. Per sequence of S source and T target tokens:
//   encoder layer   S (8 D^2 + 4 D F) + 4 S^2 D            Q, K, V, O projections; FFN; Q K^T and P V
//   decoder layer   T (8 D^2 + 4 D F) + 4 T^2 D            self-attention and FFN
//                 + T 4 D^2 + S 4 D^2 + 4 T S D            cross-attention: Q, O on the targets, K, V on the sources
//   output          T 2 D V                               the projection to the vocabulary (tied or not)
// Not counted: embeddings (a lookup), softmax, LayerNorm, dropout, the loss, Adam — a few per cent of the
// total at these sizes, and work a faster implementation may remove. The causal mask's zeros are counted
// (PyTorch and ours compute them). A training step is 3x the forward: backward computes two products (the
// input's and the weight's gradient) for each of the forward's.
#include <cstdint>

#include "transformer/config.h"

namespace stepformer::transformer {

double forward_flops(const Config& cfg, std::int64_t batch, std::int64_t src_len, std::int64_t tgt_len);
double training_step_flops(const Config& cfg, std::int64_t batch, std::int64_t src_len, std::int64_t tgt_len);

}  // namespace stepformer::transformer
