// Chapter 01. Shape legend in transformer/config.h.
#include "transformer/embedding.h"

#include <fmt/format.h>

#include <cmath>

#include "autograd/errors.h"
#include "autograd/ops.h"

namespace stepformer::transformer {

Tensor sinusoidal_table(std::int64_t max_len, std::int64_t d_model) {
  if (max_len < 1 || d_model < 1)
    throw ValueError(fmt::format("sinusoidal_table: sizes must be positive, got {} x {}", max_len, d_model));
  std::vector<double> pe(static_cast<std::size_t>(max_len * d_model));  // [max_len, D], row-major
  for (std::int64_t pos = 0; pos < max_len; ++pos) {
    for (std::int64_t col = 0; col < d_model; ++col) {
      // EXERCISE 1.1: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos of the same angle
      // Columns 2i and 2i+1 share the frequency 1 / 10000^(2i / d_model). `2i` is the even column itself,
      // not 2 * col: doubling it gives every pair the frequency of a column twice as far (a walkthrough's mistake,
      // docs/seeds.md).
      const std::int64_t two_i = col - col % 2;
      const double angle =
          static_cast<double>(pos) / std::pow(10000.0, static_cast<double>(two_i) / static_cast<double>(d_model));
      pe[static_cast<std::size_t>(pos * d_model + col)] = col % 2 == 0 ? std::sin(angle) : std::cos(angle);
      // END EXERCISE
    }
  }
  return from_vector(pe, {max_len, d_model});
}

TransformerEmbedding::TransformerEmbedding(std::int64_t vocab, const Config& cfg, Generator& gen)
    : d_model(cfg.d_model) {
  tokens = register_module("tokens", std::make_shared<nn::Embedding>(vocab, cfg.d_model, cfg.pad_id, gen));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(cfg.dropout, gen));
  pe = register_buffer("pe", sinusoidal_table(cfg.max_len, cfg.d_model));
}

Tensor TransformerEmbedding::forward(const Tensor& ids, std::int64_t start) {
  if (ids.dim() != 2)
    throw ShapeError(fmt::format("TransformerEmbedding expected token ids [B, T], got {}", to_string(ids.shape())));
  const std::int64_t T = ids.size(1);
  if (start < 0 || start + T > pe.size(0))
    throw ShapeError(fmt::format("TransformerEmbedding: sequence length {} exceeds max_len {}", start + T, pe.size(0)));
  // EXERCISE 1.2: tokens(ids) * sqrt(d_model) + PE rows start .. start+T-1, then dropout
  const Tensor x = (*tokens)(ids)*std::sqrt(static_cast<double>(d_model));  // [B, T, D]
  return (*dropout)(x + narrow(pe, 0, start, T));  // + PE rows start .. start+T-1 [T, D], broadcast over B
  // END EXERCISE
}

}  // namespace stepformer::transformer
