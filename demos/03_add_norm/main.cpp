// Chapter 03 — add & norm. Read docs/03_add_norm.md beside this file.
// Prints the mean and standard deviation of each position's vector before and after
// LayerNorm(x + Sublayer(x)) (post-norm), and what pre-norm does instead.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <cmath>

#include "architecture.h"
#include "autograd/ops.h"
#include "demo.h"
#include "nn/layers.h"
#include "transformer/add_norm.h"

namespace sf = stepformer;
using namespace stepformer::transformer;

namespace {
void print_stats(const char* label, const sf::Tensor& x) {  // x [1, T, D]
  const sf::Tensor mu = sf::mean(x, {-1});                  // [1, T]
  const sf::Tensor sd = sf::sqrt(sf::mean(sf::pow(x - sf::unsqueeze(mu, -1), 2.0), {-1}));
  fmt::print("{:<34}", label);
  for (std::int64_t t = 0; t < x.size(1); ++t) fmt::print(" {:6.2f}/{:<5.2f}", mu.at({0, t}), sd.at({0, t}));
  fmt::print("\n");
}
// LayerNorm of z = [1, 2, 3, 4] by hand (gamma 1, beta 0), then its backward for the upstream gradient
// g = [1, 0, 0, 0]: the closed form of docs/03_add_norm.md beside the engine's layer_norm backward.
void worked_layer_norm() {
  const sf::Options f64{sf::DType::float64};
  const std::vector<double> z_values{1, 2, 3, 4}, g_values{1, 0, 0, 0};
  const double D = 4, eps = 1e-5;
  double mu = 0, var = 0;
  for (double v : z_values) mu += v / D;
  for (double v : z_values) var += (v - mu) * (v - mu) / D;
  const double sigma = std::sqrt(var + eps);
  std::vector<double> x_hat, dz;
  double mean_g = 0, mean_g_xhat = 0;
  for (std::size_t j = 0; j < 4; ++j) {
    x_hat.push_back((z_values[j] - mu) / sigma);
    mean_g += g_values[j] / D;
    mean_g_xhat += g_values[j] * x_hat[j] / D;
  }
  for (std::size_t j = 0; j < 4; ++j) dz.push_back((g_values[j] - mean_g - x_hat[j] * mean_g_xhat) / sigma);

  sf::Tensor z = sf::from_vector(z_values, {4}, f64).set_requires_grad();
  const sf::Tensor y = sf::layer_norm(z, sf::ones({4}, f64), sf::zeros({4}, f64), eps);
  y.backward(sf::from_vector(g_values, {4}, f64));
  fmt::print("\n== LayerNorm of z = [1, 2, 3, 4] by hand (gamma = 1, beta = 0, eps = 1e-5)\n");
  fmt::print("mean {}, biased variance {}, sigma = sqrt(var + eps) = {:.6f}\n", mu, var, sigma);
  fmt::print("x_hat = (z - mean) / sigma      [{:.4f}]\n", fmt::join(x_hat, ", "));
  fmt::print("layer_norm(z), the engine       [{:.4f}]\n", fmt::join(y.to_vector<double>(), ", "));
  fmt::print("backward for g = [1, 0, 0, 0]: dz = (g - mean(g) - x_hat mean(g x_hat)) / sigma\n");
  fmt::print("  mean(g) = {:.4f}, mean(g x_hat) = {:.4f}\n", mean_g, mean_g_xhat);
  fmt::print("  by the formula                [{:.4f}]\n", fmt::join(dz, ", "));
  fmt::print("  the engine's z.grad()         [{:.4f}]\n", fmt::join(z.grad().to_vector<double>(), ", "));
  double sum_dz = 0, dot = 0;
  for (std::size_t j = 0; j < 4; ++j) sum_dz += dz[j], dot += dz[j] * x_hat[j];
  fmt::print(
      "  sum(dz) = {:.1e}, dz . x_hat = {:.1e}: shifting z, or scaling z - mean, leaves LayerNorm's output\n"
      "  unchanged (up to eps), so its gradient has no part along [1, 1, 1, 1] or along x_hat\n",
      sum_dz, dot);
}

}  // namespace

int main(int argc, char** argv) try {
  sf::demo::CommonOptions common;
  std::int64_t d_model = 64;
  CLI::App app{"03_add_norm: the residual connection and LayerNorm, post-norm and pre-norm"};
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.add_option("--d-model", d_model, "model size")->capture_default_str()->check(CLI::Range(2, 1024));
  sf::demo::add_common_options(app, common);
  CLI11_PARSE(app, argc, argv);

  sf::Generator gen(common.seed);
  // Inputs whose positions have very different scales and offsets, as activations deep in a stack do.
  const sf::Tensor scale = sf::from_vector(std::vector<double>{0.5, 1.0, 3.0, 8.0}, {1, 4, 1});
  const sf::Tensor shift = sf::from_vector(std::vector<double>{0.0, -2.0, 5.0, 1.0}, {1, 4, 1});
  const sf::Tensor x = sf::randn({1, 4, d_model}, gen) * scale + shift;  // [1, T = 4, D]
  sf::nn::Linear sublayer(d_model, d_model, true, gen);
  auto f = [&](const sf::Tensor& t) { return sublayer(t); };

  fmt::print("mean/std of each of the 4 positions (over D = {})\n", d_model);
  print_stats("x", x);
  print_stats("x + Sublayer(x)", x + f(x));
  AddNorm post(d_model, 0.0, false, gen);
  print_stats("post-norm: LayerNorm(x + Sub(x))", post.forward(x, f));
  AddNorm pre(d_model, 0.0, true, gen);
  print_stats("pre-norm: x + Sub(LayerNorm(x))", pre.forward(x, f));
  fmt::print(
      "\nPost-norm (the paper) hands the next sublayer vectors of mean 0 and std 1 at every position.\n"
      "Pre-norm normalises only the sublayer's input; the residual stream keeps its scale and grows\n"
      "through the stack, so a pre-norm model ends with one more LayerNorm.\n");
  stepformer::transformer::Config cfg;
  cfg.d_model = d_model;
  cfg.dropout = 0.0;
  sf::demo::draw_dot(common.out, "03_add_norm", sf::demo::add_norm_figure(cfg, {"1", "", "4"}));
  worked_layer_norm();
  return 0;
} catch (const std::exception& e) {
  return stepformer::demo::report_error("03_add_norm", e);
}
