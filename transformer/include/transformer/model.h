#pragma once
// Chapter 07 — the full model. Read docs/07_transformer.md beside this file.
#include "transformer/decoder.h"
#include "transformer/encoder.h"

namespace stepformer::transformer {

// The paper's base model (Table 3) for the given vocabularies: N = 6, d_model = 512, d_ff = 2048, h = 8,
// P_drop = 0.1. ("big" and the other rows of Table 3 are Config values too.)
Config base_config(std::int64_t src_vocab, std::int64_t tgt_vocab);

// Every matrix of `module` Glorot-uniform: the Transformer's initialisation (a deviation from torch.nn's
// per-layer defaults, as the annotated Transformer). With N(0, 1) embeddings times sqrt(d_model), token
// vectors would dwarf the positional encoding and the first softmaxes would saturate (docs/01, docs/02).
void glorot_init(nn::Module& module, Generator& gen);

// Encoder + decoder + the output projection to target-vocabulary logits (the "pre-softmax linear
// transformation", 3.4). With `tie_output`, the projection reuses the target embedding's weight [V, D]
// ("we share the same weight matrix between the ... embedding layers and the pre-softmax linear
// transformation"); otherwise it is its own Linear(D, V) with bias.
class Transformer : public nn::CallableModule<Transformer> {
 public:
  Transformer(const Config& cfg, Generator& gen = default_generator(), bool tie_output = false);

  Tensor forward(const Tensor& src, const Tensor& tgt_in);  // [B, S], [B, T] -> logits [B, T, V]
  EncoderOutput encode(const Tensor& src);                  // [B, S] -> memory [B, S, D] and its PAD mask
  Tensor logits(const Tensor& hidden);                      // [B, T, D] -> [B, T, V]

  Config cfg;
  std::shared_ptr<Encoder> encoder;
  std::shared_ptr<Decoder> decoder;
  std::shared_ptr<nn::Linear> generator;  // null when tied
};

}  // namespace stepformer::transformer
