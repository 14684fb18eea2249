#pragma once
// Loading the chapter fixtures (tools/fixtures/make_transformer_fixtures.py) into our modules and comparing.
#include <string>

#include "../helpers.h"
#include "nn/safetensors.h"
#include "transformer/encoder.h"

namespace stepformer::test {

inline nn::StateDict chapter_fixture(const std::string& name) {
  return nn::load_safetensors(std::string(STEPFORMER_FIXTURES_DIR) + "/transformer/" + name + ".safetensors").tensors;
}

// The fixtures' sizes: d_model 16, 2 heads, d_ff 32, 2 layers, PE table of 32 positions, no dropout.
inline transformer::Config small_config() {
  transformer::Config c;
  c.src_vocab = 11;
  c.tgt_vocab = 12;
  c.n_layers = 2;
  c.d_model = 16;
  c.d_ff = 32;
  c.n_heads = 2;
  c.dropout = 0.0;
  c.max_len = 32;
  return c;
}

// The fixture's "param.<prefix>..." tensors, with "param.<prefix>" stripped.
inline nn::StateDict params(const nn::StateDict& f, const std::string& prefix = "") {
  nn::StateDict out;
  for (const auto& [key, t] : f)
    if (key.starts_with("param." + prefix)) out.emplace(key.substr(6 + prefix.size()), t);
  return out;
}

// Every parameter's gradient against the fixture's "grad.<prefix><name>".
inline void check_parameter_grads(const nn::Module& m, const nn::StateDict& f, const std::string& prefix = "",
                                  double atol = 1e-5, double rtol = 1e-4) {
  for (const auto& [name, p] : m.named_parameters()) {
    INFO("gradient of " << name);
    REQUIRE(p.grad().defined());
    CHECK(close(p.grad(), f.at("grad." + prefix + name), atol, rtol));
  }
}

// Token ids as an int64 [B, len / B] tensor.
inline Tensor ids(const std::vector<std::int64_t>& v, std::int64_t B) {
  return from_vector(v, {B, static_cast<std::int64_t>(v.size()) / B}, {DType::int64});
}

// A leaf copy of a fixture input that requires grad.
inline Tensor leaf(const nn::StateDict& f, const std::string& name) {
  return contiguous(f.at("input." + name) * 1.0).detach().set_requires_grad();
}

// What an encoder would hand the decoder for this memory and these source ids: the memory and the
// source's PAD mask (tests that give the decoder a memory of their own).
inline transformer::EncoderOutput encoded(const Tensor& memory, const Tensor& src_ids, std::int64_t pad_id = 0) {
  return {memory, {}, transformer::pad_mask(src_ids, pad_id)};
}

}  // namespace stepformer::test
