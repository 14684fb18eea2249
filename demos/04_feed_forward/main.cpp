// Chapter 04 — the position-wise feed-forward network. Read docs/04_feed_forward.md beside this file.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "architecture.h"
#include "autograd/ops.h"
#include "demo.h"
#include "transformer/decoder.h"
#include "transformer/encoder.h"
#include "transformer/feed_forward.h"

namespace sf = stepformer;
using namespace stepformer::transformer;

namespace {

std::string row(const std::vector<double>& v) { return fmt::format("[{:g}]", fmt::join(v, ", ")); }
std::string matrix(const std::vector<double>& v, std::size_t columns) {  // row-major: "[1, -2; 2, -4]"
  std::string out;
  for (std::size_t i = 0; i < v.size(); i += columns)
    out += fmt::format("{}{:g}", i ? "; " : "", fmt::join(v.begin() + i, v.begin() + i + columns, ", "));
  return "[" + out + "]";
}

// One position through the FFN by hand, D 2 and F 3 (docs/04_feed_forward.md, "One position by hand"): the
// forward pass, then the backward for the upstream gradient g = dL/dy = [1, 0], each formula in plain loops beside
// the engine's gradients. The weights are in the layout Linear keeps them: w_1 [F, D], w_2 [D, F].
void worked_ffn() {
  const sf::Options f64{sf::DType::float64};
  const std::vector<double> w1{1, 0, 0, 1, 1, 1}, b1{0, 2.5, 0.5}, w2{1, 2, 3, -1, 0, 1}, b2{0.1, -0.1}, x{1, -2},
      g{1, 0};
  std::vector<double> z(3), h(3), y(2), dh(3), dz(3), dx(2), dw1(6), dw2(6);
  for (std::size_t f = 0; f < 3; ++f) {
    z[f] = w1[2 * f] * x[0] + w1[2 * f + 1] * x[1] + b1[f];
    h[f] = std::max(0.0, z[f]);
  }
  for (std::size_t d = 0; d < 2; ++d) y[d] = w2[3 * d] * h[0] + w2[3 * d + 1] * h[1] + w2[3 * d + 2] * h[2] + b2[d];
  for (std::size_t f = 0; f < 3; ++f) {
    dh[f] = w2[f] * g[0] + w2[3 + f] * g[1];  // W_2^T g
    dz[f] = z[f] > 0 ? dh[f] : 0.0;           // ReLU passes the gradient where it passed the value
    for (std::size_t d = 0; d < 2; ++d)
      dw1[2 * f + d] = dz[f] * x[d] + 0.0, dw2[3 * d + f] = g[d] * h[f] + 0.0;  // + 0: no "-0"
  }
  for (std::size_t d = 0; d < 2; ++d) dx[d] = w1[d] * dz[0] + w1[2 + d] * dz[1] + w1[4 + d] * dz[2];  // W_1^T dz

  PositionwiseFeedForward ffn(2, 3);  // dropout 0
  ffn.w_1->weight.set_data(sf::from_vector(w1, {3, 2}, f64));
  ffn.w_1->bias.set_data(sf::from_vector(b1, {3}, f64));
  ffn.w_2->weight.set_data(sf::from_vector(w2, {2, 3}, f64));
  ffn.w_2->bias.set_data(sf::from_vector(b2, {2}, f64));
  sf::Tensor input = sf::from_vector(x, {1, 1, 2}, f64).set_requires_grad();  // [B 1, T 1, D 2]
  const sf::Tensor out = ffn.forward(input);
  out.backward(sf::from_vector(g, {1, 1, 2}, f64));
  const auto engine = [](const sf::Tensor& t) { return t.to_vector<double>(); };

  fmt::print("\n== one position by hand (D 2, F 3): x = {}, upstream gradient g = dL/dy = {}\n", row(x), row(g));
  fmt::print("z = W_1 x + b_1 = {}, h = ReLU(z) = {}\n", row(z), row(h));
  fmt::print("y = W_2 h + b_2 = {}; the engine's y {}\n", row(y), row(engine(out)));
  fmt::print("dL/dh = W_2^T g = {}; dL/dz = dL/dh where z > 0, else 0 = {}\n", row(dh), row(dz));
  fmt::print("{:<22}{:<26}{}\n", "", "by the formulas", "the engine");
  const auto line = [](const char* what, const std::string& hand, const std::string& got) {
    fmt::print("{:<22}{:<26}{}\n", what, hand, got);
  };
  line("dL/db_2 = g", row(g), row(engine(ffn.w_2->bias.grad())));
  line("dL/dW_2 = g h^T", matrix(dw2, 3), matrix(engine(ffn.w_2->weight.grad()), 3));
  line("dL/db_1 = dL/dz", row(dz), row(engine(ffn.w_1->bias.grad())));
  line("dL/dW_1 = dL/dz x^T", matrix(dw1, 2), matrix(engine(ffn.w_1->weight.grad()), 2));
  line("dL/dx = W_1^T dL/dz", row(dx), row(engine(input.grad())));
  fmt::print(
      "unit 3's z is negative: the ReLU passes it no gradient, so its row of W_1, its bias and W_2's column 3\n"
      "learn nothing from this position\n");
}

}  // namespace

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
  worked_ffn();
  return 0;
} catch (const std::exception& e) {
  return stepformer::demo::report_error("04_feed_forward", e);
}
