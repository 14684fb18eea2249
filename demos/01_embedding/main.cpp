// Chapter 01 — embedding and positional encoding. Read docs/01_embedding.md beside this file.
// Shows the shapes through the step, writes the PE table as a heatmap, and shows why the sinusoids
// encode relative position: PE(pos + k) is a fixed linear map of PE(pos), and dot products between
// positions fall off with distance.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cmath>

#include "autograd/ops.h"
#include "demo.h"
#include "transformer/embedding.h"
#include "transformer/model.h"

namespace sf = stepformer;
using namespace stepformer::transformer;

int main(int argc, char** argv) try {
  sf::demo::CommonOptions common;
  std::int64_t d_model = 64, max_len = 64;
  CLI::App app{"01_embedding: token embedding x sqrt(d_model) + sinusoidal positional encoding"};
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.add_option("--d-model", d_model, "embedding size")->capture_default_str()->check(CLI::Range(2, 1024));
  app.add_option("--max-len", max_len, "positions in the PE heatmap")
      ->capture_default_str()
      ->check(CLI::Range(8, 4096));
  sf::demo::add_common_options(app, common);
  CLI11_PARSE(app, argc, argv);

  const auto& data = sf::demo::toy_data();
  Config cfg;
  cfg.src_vocab = static_cast<std::int64_t>(data.src_vocab.size());
  cfg.d_model = d_model;
  cfg.max_len = max_len;
  cfg.dropout = 0.1;
  sf::Generator gen(common.seed);
  TransformerEmbedding embed(cfg.src_vocab, cfg, gen);

  const sf::Tensor ids = data.src_ids();  // [B, S]
  const sf::Tensor x = embed.forward(ids);
  fmt::print("== shapes through the embedding step (B = 3 sentences, S = 8 tokens, D = {})\n", d_model);
  fmt::print("token ids                 {}  e.g. {}\n", sf::to_string(ids.shape()), fmt::join(data.src[0], " "));
  fmt::print("token vectors             {}  one row of the [{}, {}] table per id\n",
             sf::to_string((*embed.tokens)(ids).shape()), cfg.src_vocab, d_model);
  fmt::print("x sqrt(d_model), + PE[:S], then dropout -> {}\n\n", sf::to_string(x.shape()));

  // How big are token vectors next to PE? It depends on the initialisation the sqrt(d_model) multiplies.
  auto rms = [](const sf::Tensor& t) { return std::sqrt(sf::mean(t * t).item()); };
  const double root_d = std::sqrt(static_cast<double>(d_model));
  fmt::print("== scale: root mean square of the token vectors, before and after x sqrt(d_model) = x {:.2f}\n", root_d);
  fmt::print("{:<50}{:.2f}  (sin and cos: about 1/sqrt(2))\n", "PE rows 0..7", rms(sf::narrow(embed.pe, 0, 0, 8)));
  fmt::print("{:<50}{:.2f} -> {:.2f}  tokens dwarf PE\n", "nn::Embedding's default N(0, 1) rows (torch's)",
             rms((*embed.tokens)(ids)), root_d * rms((*embed.tokens)(ids)));
  glorot_init(embed, gen);  // what Transformer's constructor does
  const double glorot = rms((*embed.tokens)(ids));
  fmt::print("{:<50}{:.2f} -> {:.2f}  the same order as PE\n", "Glorot rows, as the full model initialises them",
             glorot, root_d * glorot);
  fmt::print(
      "  Glorot-uniform on [V, D] has std sqrt(2 / (V + D)); times sqrt(D): {:.2f} here, {:.2f} for the\n"
      "  base model (V 8000, D 512): the scale shares the embedding with a Linear-sized init and brings\n"
      "  it up to PE's order, not above it.\n\n",
      std::sqrt(2.0 / static_cast<double>(cfg.src_vocab + d_model)) * root_d,
      std::sqrt(2.0 / (8000.0 + 512.0)) * std::sqrt(512.0));

  const sf::Tensor pe = embed.pe;  // [max_len, D]
  fmt::print("== the PE table [{}, {}]: column 2i is sin(pos / 10000^(2i/D)), column 2i+1 the cosine\n", max_len,
             d_model);
  sf::demo::write_output(
      common.out, "01_positional_encoding.svg",
      sf::demo::heatmap_svg(pe, {}, {}, fmt::format("PE[pos, i]: {} positions (rows) x {} dims", max_len, d_model)));

  fmt::print(
      "\n== relative position: PE(10) . PE(10 + k) is largest at k = 0 and falls with distance (not monotonically)\n");
  const sf::Tensor p10 = sf::narrow(pe, 0, 10, 1);
  for (std::int64_t k : {0, 1, 2, 4, 8, 16, 32})
    if (10 + k < max_len)
      fmt::print("  k = {:2d}  dot = {:6.2f}\n", k, sf::sum(p10 * sf::narrow(pe, 0, 10 + k, 1)).item());

  // Each (sin, cos) pair at frequency w rotates by the angle w k: PE(pos + k) = M_k PE(pos) for every pos.
  const std::int64_t k = 3;
  double worst = 0;
  for (std::int64_t pos = 0; pos + k < max_len; ++pos)
    for (std::int64_t pair = 0; 2 * pair + 1 < d_model; ++pair) {
      const double w = 1.0 / std::pow(10000.0, 2.0 * static_cast<double>(pair) / static_cast<double>(d_model));
      const double s = pe.at({pos, 2 * pair}), c = pe.at({pos, 2 * pair + 1});
      worst = std::max(worst, std::abs(pe.at({pos + k, 2 * pair}) - (s * std::cos(w * k) + c * std::sin(w * k))));
    }
  fmt::print("PE(pos + {}) = M_{} PE(pos) with one rotation matrix for all positions: max error {:.1e}\n", k, k, worst);
  return 0;
} catch (const std::exception& e) {
  return stepformer::demo::report_error("01_embedding", e);
}
