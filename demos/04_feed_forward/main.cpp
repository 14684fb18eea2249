// Chapter 04 — the position-wise feed-forward network. Read docs/04_feed_forward.md beside this file.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "architecture.h"
#include "autograd/ops.h"
#include "demo.h"
#include "transformer/decoder.h"
#include "transformer/encoder.h"
#include "transformer/feed_forward.h"

namespace sf = stepformer;
using namespace stepformer::transformer;

int main(int argc, char** argv) try {
  sf::demo::CommonOptions common;
  std::int64_t d_model = 512, d_ff = 2048;
  CLI::App app{"04_feed_forward: FFN(x) = max(0, x W1 + b1) W2 + b2, at every position separately"};
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.add_option("--d-model", d_model, "model size")->capture_default_str()->check(CLI::Range(2, 4096));
  app.add_option("--d-ff", d_ff, "inner size")->capture_default_str()->check(CLI::Range(2, 16384));
  sf::demo::add_common_options(app, common);
  CLI11_PARSE(app, argc, argv);

  sf::Generator gen(common.seed);
  PositionwiseFeedForward ffn(d_model, d_ff, 0.1, gen);
  ffn.eval();
  const sf::Tensor x = sf::randn({2, 5, d_model}, gen);  // [B, T, D]
  const sf::Tensor hidden = sf::relu((*ffn.w_1)(x));     // [B, T, F]
  const sf::Tensor y = ffn.forward(x);                   // [B, T, D]
  fmt::print("x {}  -> w_1 + ReLU {}  -> w_2 {}\n", sf::to_string(x.shape()), sf::to_string(hidden.shape()),
             sf::to_string(y.shape()));
  fmt::print("parameters: w_1 {} + {}, w_2 {} + {} = {} (2 D F + F + D = {})\n", d_model * d_ff, d_ff, d_ff * d_model,
             d_model, ffn.parameter_count(), 2 * d_model * d_ff + d_ff + d_model);
  // The FFN's share of a whole layer, counted from the layers themselves (heads do not change the count).
  Config cfg;
  cfg.d_model = d_model;
  cfg.d_ff = d_ff;
  cfg.n_heads = 1;
  const auto ffn_params = static_cast<double>(ffn.parameter_count());
  const auto enc = static_cast<double>(EncoderLayer(cfg, gen).parameter_count());
  const auto dec = static_cast<double>(DecoderLayer(cfg, gen).parameter_count());
  cfg.dropout = 0.1;  // ffn's
  sf::demo::draw_dot(common.out, "04_feed_forward", sf::demo::feed_forward_figure(cfg, {"2", "", "5"}));
  fmt::print("the FFN's share of a layer: encoder {:.0f} of {:.0f} ({:.1f}%), decoder {:.0f} of {:.0f} ({:.1f}%)\n",
             ffn_params, enc, 100 * ffn_params / enc, ffn_params, dec, 100 * ffn_params / dec);
  fmt::print("ReLU zeroes {:.0f}% of the hidden units for this input\n",
             100.0 * sf::mean(sf::eq(hidden, sf::zeros({})).to(sf::DType::float32)).item());

  double worst = 0;
  for (std::int64_t t = 0; t < 5; ++t) {
    const sf::Tensor alone = ffn.forward(sf::narrow(x, 1, t, 1));  // one position at a time
    worst = std::max(worst,
                     sf::max(sf::sub(alone, sf::narrow(y, 1, t, 1)) * sf::sub(alone, sf::narrow(y, 1, t, 1))).item());
  }
  fmt::print("each position computed alone equals its row of the batched result: max squared diff {:.1e}\n", worst);
  return 0;
} catch (const std::exception& e) {
  return stepformer::demo::report_error("04_feed_forward", e);
}
