// Chapter 03 — add & norm. Read docs/03_add_norm.md beside this file.
// Prints the mean and standard deviation of each position's vector before and after
// LayerNorm(x + Sublayer(x)) (post-norm), and what pre-norm does instead.
#include <fmt/format.h>

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
}  // namespace

int main(int argc, char** argv) {
  sf::demo::CommonOptions common;
  std::int64_t d_model = 64;
  CLI::App app{"03_add_norm: the residual connection and LayerNorm, post-norm and pre-norm"};
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
  return 0;
}
