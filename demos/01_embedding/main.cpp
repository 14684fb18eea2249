// Chapter 01 — embedding and positional encoding. Read docs/01_embedding.md beside this file.
// Shows the shapes through the step, writes the PE table as a heatmap, and shows why the sinusoids
// encode relative position: PE(pos + k) is a fixed linear map of PE(pos), and dot products between
// positions fall off with distance.
#include <fmt/format.h>

#include <cmath>

#include "autograd/ops.h"
#include "demo.h"
#include "transformer/embedding.h"

namespace sf = stepformer;
using namespace stepformer::transformer;

int main(int argc, char** argv) {
  sf::demo::CommonOptions common;
  std::int64_t d_model = 64, max_len = 64;
  CLI::App app{"01_embedding: token embedding x sqrt(d_model) + sinusoidal positional encoding"};
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
  const sf::Tensor tokens = (*embed.tokens)(ids);
  const sf::Tensor scaled = tokens * std::sqrt(static_cast<double>(d_model));
  const sf::Tensor x = embed.forward(ids);
  fmt::print("== shapes through the embedding step (B = 3 sentences, S = 8 tokens, D = {})\n", d_model);
  fmt::print("token ids                 {}  e.g. {}\n", sf::to_string(ids.shape()), fmt::join(data.src[0], " "));
  fmt::print("token vectors             {}  one row of the [{}, {}] table per id\n", sf::to_string(tokens.shape()),
             cfg.src_vocab, d_model);
  fmt::print("x sqrt(d_model) = x {:.2f}  {}  std {:.2f} -> {:.2f} (PE values lie in [-1, 1])\n",
             std::sqrt(static_cast<double>(d_model)), sf::to_string(scaled.shape()),
             std::sqrt(sf::mean(tokens * tokens).item()), std::sqrt(sf::mean(scaled * scaled).item()));
  fmt::print("+ PE[:S], then dropout    {}\n\n", sf::to_string(x.shape()));

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
}
