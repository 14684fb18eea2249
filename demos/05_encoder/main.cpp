// Chapter 05 — the encoder. Read docs/05_encoder.md beside this file.
// One forward pass of an (untrained) encoder over the seed's three sentences; per-layer attention.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "architecture.h"
#include "autograd/ops.h"
#include "demo.h"
#include "transformer/encoder.h"

namespace sf = stepformer;
using namespace stepformer::transformer;

int main(int argc, char** argv) try {
  sf::demo::CommonOptions common;
  Config cfg = sf::demo::small_stack_config();
  CLI::App app{"05_encoder: EncoderLayer (self-attention + FFN, each with add & norm) and the Encoder stack"};
  app.option_defaults()->always_capture_default();  // --help shows every default
  sf::demo::add_stack_options(app, cfg);
  sf::demo::add_common_options(app, common);
  CLI11_PARSE(app, argc, argv);
  sf::demo::finish_stack_config(cfg);

  const auto& data = sf::demo::toy_data();
  sf::Generator gen(common.seed);
  Encoder encoder(cfg, gen);
  encoder.eval();

  const sf::Tensor src = data.src_ids();  // [3, 8]
  keep_attention_weights(encoder);        // the per-layer weights drawn below (flash attention stores none)
  const EncoderOutput out = encoder.forward(src);
  fmt::print("source ids {} -> memory {}; {} parameters in {} layers\n", sf::to_string(src.shape()),
             sf::to_string(out.memory.shape()), encoder.parameter_count(), cfg.n_layers);
  for (std::size_t l = 0; l < out.attention.size(); ++l) {
    const sf::Tensor w = sf::reshape(sf::narrow(sf::narrow(out.attention[l].tensor(), 0, 0, 1), 1, 0, 1), {8, 8});
    fmt::print("\n== layer {}, head 0, sentence 1 (the P column is 0: padding is masked)\n{}", l,
               sf::demo::format_matrix(w, data.src[0], data.src[0]));
    sf::demo::write_output(
        common.out, fmt::format("05_encoder_layer{}_head0.svg", l),
        sf::demo::heatmap_svg(w, data.src[0], data.src[0], fmt::format("encoder layer {}, head 0", l)));
  }
  sf::demo::draw_dot(common.out, "05_encoder_layer", sf::demo::encoder_layer_figure(cfg, {"3", "8", ""}));

  // The parameter count by its closed form (docs/05_encoder.md, "Shapes"), part by part.
  const std::int64_t V = cfg.src_vocab, D = cfg.d_model, F = cfg.d_ff, N = cfg.n_layers;
  const std::int64_t attention = 4 * (D * D + D), ffn = 2 * D * F + F + D, norms = 4 * D;
  fmt::print(
      "\nparameters: embedding V D = {} x {} = {}; per layer, attention 4(D^2 + D) = {}, FFN 2 D F + F + D = {},\n"
      "two LayerNorms 4 D = {}; V D + N (...) = {} + {} x {} = {}; the encoder's parameter_count() {}\n",
      V, D, V * D, attention, ffn, norms, V * D, N, attention + ffn + norms, V * D + N * (attention + ffn + norms),
      encoder.parameter_count());

  // Padding cannot leak (docs/05_encoder.md, "Why padding cannot leak"): sentence 1 again with more PAD after it.
  const std::int64_t S = src.size(1), extra = 3;
  std::vector<std::int64_t> ids = sf::narrow(src, 0, 0, 1).to_vector<std::int64_t>();
  const auto real = std::count_if(ids.begin(), ids.end(), [&cfg](std::int64_t id) { return id != cfg.pad_id; });
  ids.insert(ids.end(), extra, cfg.pad_id);
  const sf::Tensor longer = encoder.forward(sf::from_vector(ids, {1, S + extra}, {sf::DType::int64})).memory;
  const auto a = sf::narrow(longer, 1, 0, real).to_vector<double>(),
             b = sf::narrow(sf::narrow(out.memory, 0, 0, 1), 1, 0, real).to_vector<double>();
  double moved = 0;
  for (std::size_t e = 0; e < a.size(); ++e) moved = std::max(moved, std::abs(a[e] - b[e]));
  fmt::print(
      "sentence 1 ({} real tokens, {} PAD) again with {} more PAD after it, [1, {}] -> [1, {}]: the real tokens'\n"
      "memory moves by at most {:.1e}\n",
      real, S - real, extra, S, S + extra, moved);
  fmt::print("\nThe weights are untrained; chapter 07 trains this encoder to translate.\n");
  return 0;
} catch (const std::exception& e) {
  return stepformer::demo::report_error("05_encoder", e);
}
