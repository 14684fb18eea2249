// Chapter 06 — the decoder. Read docs/06_decoder.md beside this file.
// Shows causality: changing a later target token leaves every earlier position's output unchanged.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "architecture.h"
#include "autograd/ops.h"
#include "demo.h"
#include "transformer/attention.h"
#include "transformer/decoder.h"

namespace sf = stepformer;
using namespace stepformer::transformer;

int main(int argc, char** argv) try {
  sf::demo::CommonOptions common;
  Config cfg = sf::demo::small_stack_config();
  CLI::App app{"06_decoder: masked self-attention, cross-attention, FFN; why the decoder is causal"};
  app.option_defaults()->always_capture_default();  // --help shows every default
  sf::demo::add_stack_options(app, cfg);
  sf::demo::add_common_options(app, common);
  CLI11_PARSE(app, argc, argv);
  sf::demo::finish_stack_config(cfg);

  const auto& data = sf::demo::toy_data();
  sf::Generator gen(common.seed);
  Encoder encoder(cfg, gen);
  Decoder decoder(cfg, gen);
  encoder.eval();
  decoder.eval();

  keep_attention_weights(decoder);  // the self- and cross-attention weights drawn below (flash stores none)
  const sf::Tensor src = sf::narrow(data.src_ids(), 0, 0, 1);       // [1, 8]: 我 有 一 个 好 朋 友 P
  const EncoderOutput encoded = encoder(src);                       // memory [1, 8, D] and the PAD mask
  const sf::Tensor a_ids = sf::narrow(data.tgt_in_ids(), 0, 0, 1);  // S I have a good friend .
  const sf::Tensor b_ids = sf::narrow(data.tgt_in_ids(), 0, 2, 1);  // S I have a boy friend .
  const DecoderOutput a = decoder(a_ids, encoded), b = decoder(b_ids, encoded);
  fmt::print("target A: {}\ntarget B: {}   (differ at position 4)\n\n", fmt::join(data.tgt_in[0], " "),
             fmt::join(data.tgt_in[2], " "));
  fmt::print("position  token A  token B   max |output A - output B|\n");
  for (std::int64_t t = 0; t < 7; ++t) {
    const sf::Tensor d = sf::sub(sf::narrow(a.hidden, 1, t, 1), sf::narrow(b.hidden, 1, t, 1));
    fmt::print("{:8d}  {:>7}  {:>7}   {:.6f}\n", t, data.tgt_in[0][static_cast<std::size_t>(t)],
               data.tgt_in[2][static_cast<std::size_t>(t)], std::sqrt(sf::max(d * d).item()));
  }
  fmt::print("Positions 0-3 are identical: the subsequent mask keeps them from seeing position 4.\n");

  const auto& words = data.tgt_in[0];
  const sf::Tensor self = sf::reshape(sf::narrow(a.self_attention[0].tensor(), 1, 0, 1), {7, 7});
  const sf::Tensor cross = sf::reshape(sf::narrow(a.cross_attention[0].tensor(), 1, 0, 1), {7, 8});
  fmt::print("\n== layer 0, head 0: masked self-attention (upper triangle exactly 0)\n{}",
             sf::demo::format_matrix(self, words, words));
  sf::demo::write_output(common.out, "06_decoder_self_attention.svg",
                         sf::demo::heatmap_svg(self, words, words, "decoder layer 0, head 0: masked self-attention"));
  sf::demo::write_output(common.out, "06_decoder_cross_attention.svg",
                         sf::demo::heatmap_svg(cross, words, data.src[0], "decoder layer 0, head 0: cross-attention"));

  sf::demo::draw_dot(common.out, "06_decoder_layer", sf::demo::decoder_layer_figure(cfg, {"1", "8", "7"}));

  // Teacher forcing: the decoder reads the target shifted right (BOS first) and predicts it unshifted (EOS
  // last); position i may read inputs 0..i only. Drawn from the demo's own ids and the mask the decoder uses.
  const sf::Tensor sees = sf::logical_not(decoder_mask(a_ids, cfg.pad_id)).to(sf::DType::float32);  // [1, 1, 7, 7]
  std::vector<std::string> rows;
  for (std::size_t t = 0; t < words.size(); ++t) rows.push_back(fmt::format("{} -> {}", words[t], data.tgt_out[0][t]));
  fmt::print("\n== shifted right: each position reads the inputs up to itself and predicts the next target token\n");
  for (const auto& r : rows) fmt::print("  {}\n", r);
  sf::demo::write_output(
      common.out, "06_shifted_right.svg",
      sf::demo::heatmap_svg(sf::reshape(sees, {7, 7}), rows, words,
                            "row: decoder input -> the target it predicts; dark: the inputs it may read"));
  return 0;
} catch (const std::exception& e) {
  return stepformer::demo::report_error("06_decoder", e);
}
