#pragma once
// Chapter 01 — embeddings and positional encoding. Read docs/01_embedding.md beside this file.
#include "autograd/random.h"
#include "nn/layers.h"
#include "transformer/config.h"

namespace stepformer::transformer {

// "PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))"
// (section 3.5). Returns the table [max_len, D]. An odd D gets sines at every even column and cosines
// at every odd one, so the last column is a sine.
Tensor sinusoidal_table(std::int64_t max_len, std::int64_t d_model);

// "we add positional encodings to the input embeddings at the bottoms of the encoder and decoder stacks
// ... we apply dropout to the sums of the embeddings and the positional encodings" (3.5, 5.4).
// "In the embedding layers, we multiply those weights by sqrt(d_model)" (3.4).
class TransformerEmbedding : public nn::CallableModule<TransformerEmbedding> {
 public:
  TransformerEmbedding(std::int64_t vocab, const Config& cfg, Generator& gen = default_generator());
  // int64 [B, T] -> [B, T, D]; the tokens sit at positions start .. start + T - 1 (start > 0 when
  // decoding one token at a time with a cache).
  Tensor forward(const Tensor& ids, std::int64_t start = 0);

  std::shared_ptr<nn::Embedding> tokens;  // weight [V, D]
  std::shared_ptr<nn::Dropout> dropout;
  Tensor pe;  // buffer [max_len, D]: a constant, saved with the model but never trained
  std::int64_t d_model;
};

}  // namespace stepformer::transformer
