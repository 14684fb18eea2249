// Chapter 07. Shape legend in transformer/config.h.
#include "transformer/model.h"

#include <fmt/format.h>

#include "autograd/errors.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/init.h"

namespace stepformer::transformer {

Config base_config(std::int64_t src_vocab, std::int64_t tgt_vocab) {
  Config c;
  c.src_vocab = src_vocab;
  c.tgt_vocab = tgt_vocab;
  return c;  // the defaults of Config are the base model's
}

void glorot_init(nn::Module& module, Generator& gen) {
  for (auto& [name, p] : module.named_parameters())
    if (p.dim() == 2) nn::init::xavier_uniform_(p, 1.0, gen);
}

Transformer::Transformer(const Config& c, Generator& gen, bool tie_output) : cfg(c) {
  encoder = register_module("encoder", std::make_shared<Encoder>(cfg, gen));
  decoder = register_module("decoder", std::make_shared<Decoder>(cfg, gen));
  if (!tie_output)
    generator = register_module("generator", std::make_shared<nn::Linear>(cfg.d_model, cfg.tgt_vocab, true, gen));
  glorot_init(*this, gen);
  NoGradGuard no_grad;
  for (const auto& emb : {encoder->embed->tokens, decoder->embed->tokens}) {
    Tensor pad_row = narrow(emb->weight, 0, cfg.pad_id, 1);
    fill_(pad_row, 0.0);
  }
}

EncoderOutput Transformer::encode(const Tensor& src) { return (*encoder)(src); }

Tensor Transformer::logits(const Tensor& hidden) {
  if (generator) return (*generator)(hidden);
  return matmul(hidden, transpose(decoder->embed->tokens->weight, 0, 1));  // tied: h E^T, [B, T, V]
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt_in) {
  return logits((*decoder)(tgt_in, encode(src)).hidden);  // [B, T, V]
}

}  // namespace stepformer::transformer
