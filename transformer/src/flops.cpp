#include "transformer/flops.h"

namespace stepformer::transformer {

double forward_flops(const Config& cfg, std::int64_t batch, std::int64_t src_len, std::int64_t tgt_len) {
  const auto d = static_cast<double>(cfg.d_model), f = static_cast<double>(cfg.d_ff);
  const auto s = static_cast<double>(src_len), t = static_cast<double>(tgt_len);
  const auto layers = static_cast<double>(cfg.n_layers), vocab = static_cast<double>(cfg.tgt_vocab);
  const double encoder_layer = s * (8 * d * d + 4 * d * f) + 4 * s * s * d;
  const double decoder_layer =
      t * (8 * d * d + 4 * d * f) + 4 * t * t * d + t * 4 * d * d + s * 4 * d * d + 4 * t * s * d;
  const double output = t * 2 * d * vocab;
  return static_cast<double>(batch) * (layers * (encoder_layer + decoder_layer) + output);
}

double training_step_flops(const Config& cfg, std::int64_t batch, std::int64_t src_len, std::int64_t tgt_len) {
  return 3 * forward_flops(cfg, batch, src_len, tgt_len);
}

}  // namespace stepformer::transformer
