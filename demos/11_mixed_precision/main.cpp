// Chapter 11 — mixed precision. Read docs/11_mixed_precision.md beside this file.
//
// 1. the formats: float32, bfloat16 and float16 side by side (range against precision);
// 2. rounding: round-to-nearest-even against truncation, on many values;
// 3. accumulation: a bfloat16 dot product summed in float32, and what a bfloat16 sum would lose;
// 4. master weights: what storing a weight in bfloat16 does to small updates;
// 5. training: the toy pairs of chapter 07 three ways from the same weights: float32, bfloat16 autocast
//    (float32 master weights), and bfloat16 autocast with the weights stored in bfloat16, counting the
//    updates that storing them loses. Writes the three loss curves;
// 6. autocast's placement: the graph it records for a feed-forward network, which op ran in which precision.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <random>

#include "architecture.h"
#include "autograd/autocast.h"
#include "autograd/bfloat16.h"
#include "autograd/grad_mode.h"
#include "autograd/graphviz.h"
#include "autograd/ops.h"
#include "demo.h"
#include "transformer/data.h"
#include "transformer/feed_forward.h"
#include "transformer/train.h"

namespace sf = stepformer;
using namespace stepformer::transformer;

namespace {

float bf16(float x) { return sf::float_from_bf16_bits(sf::bf16_bits_from_float(x)); }

// IEEE half precision, for comparison only (the engine has no float16): 10 mantissa bits, exponents -14..15,
// subnormals below 2^-14, round to nearest even, infinity past 65504.
double float16(double x) {
  if (!std::isfinite(x)) return x;
  int e = 0;
  std::frexp(std::abs(x), &e);  // |x| = m 2^e, m in [0.5, 1)
  const double ulp = std::ldexp(1.0, std::max(e - 1, -14) - 10);
  const double r = std::nearbyint(std::abs(x) / ulp) * ulp;  // the default rounding mode: ties to even
  return std::copysign(r > 65504 ? INFINITY : r, x);
}

std::string bits16(std::uint16_t b) {
  const std::string s = fmt::format("{:016b}", b);
  return s.substr(0, 1) + " " + s.substr(1, 8) + " " + s.substr(9);  // sign, exponent, mantissa
}

void formats() {
  fmt::print("== 1. the formats: bfloat16 keeps float32's 8 exponent bits, float16 keeps 10 mantissa bits\n");
  fmt::print("{:>14} {:>14} {:>22} {:>14} {:>14}\n", "float32", "bfloat16", "bfloat16 bits", "float16", "bf16 rel err");
  for (const float x : {1.0f / 3, 3.14159265f, 1000.5f, 70000.0f, 1e-6f, 1e-8f, 3e38f}) {
    const float b = bf16(x);
    fmt::print("{:>14.8g} {:>14.8g} {:>22} {:>14.8g} {:>14.2e}\n", x, b, bits16(sf::bf16_bits_from_float(x)),
               float16(x), std::abs(b - x) / std::abs(x));
  }
  fmt::print(
      "bfloat16: 8 significant bits (relative step 2^-8 = {:.2e}), largest {:.3e}, smallest normal {:.3e}\n"
      "float16: 11 significant bits (2^-11 = {:.2e}), largest 65504, smallest normal {:.3e}: a gradient of 1e-8 is 0\n"
      "in float16 (hence loss scaling) and 1e-8 in bfloat16; 70000 is inf in float16\n\n",
      std::ldexp(1.0, -8), sf::float_from_bf16_bits(0x7F7F), sf::float_from_bf16_bits(0x0080), std::ldexp(1.0, -11),
      std::ldexp(1.0, -14));
}

void rounding() {
  fmt::print("== 2. rounding 100000 values of [1, 2) to bfloat16\n");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(1.0f, 2.0f);
  double nearest = 0, truncated = 0, nearest_abs = 0, truncated_abs = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float x = u(rng);
    const float t = sf::float_from_bits(sf::float_bits(x) & 0xFFFF0000u);  // drop the low 16 bits
    nearest += bf16(x) - x, truncated += t - x;
    nearest_abs += std::abs(bf16(x) - x), truncated_abs += std::abs(t - x);
  }
  fmt::print("round to nearest even: mean error {:+.2e}, mean |error| {:.2e}\n", nearest / n, nearest_abs / n);
  fmt::print("truncation:            mean error {:+.2e}, mean |error| {:.2e}  (always towards zero: a bias)\n\n",
             truncated / n, truncated_abs / n);
}

void accumulation() {
  fmt::print("== 3. a dot product of 4096 bfloat16 pairs\n");
  const std::int64_t n = 4096;
  sf::Generator gen(3);
  const sf::Tensor a = sf::uniform({1, n}, 0, 1, gen).to(sf::DType::bfloat16);
  const sf::Tensor b = sf::uniform({n, 1}, 0, 1, gen).to(sf::DType::bfloat16);
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  double exact = 0;
  float in_bf16 = 0;
  for (std::size_t i = 0; i < av.size(); ++i) {
    exact += av[i] * bv[i];
    in_bf16 = bf16(in_bf16 + bf16(static_cast<float>(av[i] * bv[i])));  // a bfloat16 running sum
  }
  const double ours = sf::matmul(a, b).to(sf::DType::float32).at({0, 0});
  sf::Tensor wide;
  {
    sf::AutocastGuard autocast(sf::DType::bfloat16);
    wide = sf::matmul(a.to(sf::DType::float32), b.to(sf::DType::float32));
  }
  fmt::print("exact (double)                     {:.6f}\n", exact);
  fmt::print("float32 sum, float32 product       {:.6f}  (autocast's matmul)\n", wide.at({0, 0}));
  fmt::print("float32 sum, rounded to bfloat16   {:.6f}  (a bfloat16 matmul: one rounding, at the end)\n", ours);
  fmt::print(
      "bfloat16 running sum               {:.6f}  (each addition rounded: once the sum is large, the\n"
      "                                             small products fall below half its last bit)\n\n",
      in_bf16);
}

// --- 4. training ------------------------------------------------------------------------------------------
struct Run {
  std::vector<double> losses;
  double lost = 0;  // bf16 weights: the share of non-zero updates that rounding the weights undid
};

Run train_toy(sf::DType precision, bool bf16_weights, std::int64_t steps, std::uint64_t seed) {
  const auto pairs = toy_pairs();
  std::vector<std::vector<std::string>> src, tgt;
  for (const auto& p : pairs) src.push_back(p.src), tgt.push_back(p.tgt);
  const Vocabulary sv = Vocabulary::build(src), tv = Vocabulary::build(tgt);
  Config cfg;
  cfg.src_vocab = sv.size(), cfg.tgt_vocab = tv.size(), cfg.n_layers = 2, cfg.d_model = 64, cfg.d_ff = 256;
  cfg.n_heads = 4, cfg.dropout = 0.1, cfg.max_len = 64, cfg.pad_id = Vocabulary::kPad;
  sf::Generator gen(seed);
  Transformer model(cfg, gen);
  Trainer trainer(model, {.warmup = 30, .lr_factor = 0.3, .precision = precision});  // chapter 07's toy recipe
  const Batch batch = make_batch(pairs, sv, tv);
  Run run;
  std::int64_t changed = 0, lost = 0;
  auto round_weights = [&] {  // store every weight in bfloat16 (what autocast's float32 masters avoid)
    sf::NoGradGuard no_grad;
    for (sf::Tensor p : model.parameters()) sf::copy_(p, p.to(sf::DType::bfloat16));
  };
  if (bf16_weights) round_weights();
  for (std::int64_t s = 0; s < steps; ++s) {
    std::vector<std::vector<float>> before;
    if (bf16_weights)
      for (const sf::Tensor& p : model.parameters()) before.push_back(p.to_vector<float>());
    run.losses.push_back(trainer.step(batch));
    if (!bf16_weights) continue;
    const auto params = model.parameters();
    std::vector<std::vector<float>> stepped;
    for (const sf::Tensor& p : params) stepped.push_back(p.to_vector<float>());
    round_weights();
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto after = params[i].to_vector<float>();
      for (std::size_t j = 0; j < after.size(); ++j) {
        if (stepped[i][j] == before[i][j]) continue;  // the step did not move this weight
        changed += 1;
        lost += after[j] == before[i][j];  // rounding to bfloat16 moved it back
      }
    }
  }
  run.lost = changed ? static_cast<double>(lost) / static_cast<double>(changed) : 0;
  return run;
}

int training(const sf::demo::CommonOptions& common) {
  fmt::print("== 4. where the weights live: 1000 updates of +0.001 to a weight of 1\n");
  float w32 = 1.0f, w16 = 1.0f;
  for (int i = 0; i < 1000; ++i) w32 += 0.001f, w16 = bf16(w16 + 0.001f);
  fmt::print(
      "stored in float32: {:.4f}; stored in bfloat16: {:.4f} (its last bit at 1 is 2^-7 = 0.0078: each +0.001\n"
      "rounds back to 1). The optimizer's updates are small against the weights: masters stay float32\n\n",
      w32, w16);
  const std::int64_t steps = 150;
  fmt::print("== 5. chapter 07's toy pairs, {} steps from the same weights (seed {})\n", steps, common.seed);
  const Run fp32 = train_toy(sf::DType::float32, false, steps, common.seed);
  const Run mixed = train_toy(sf::DType::bfloat16, false, steps, common.seed);
  const Run bf16_weights = train_toy(sf::DType::bfloat16, true, steps, common.seed);
  fmt::print("{:>6} {:>10} {:>16} {:>22}\n", "step", "float32", "bf16 autocast", "bf16 autocast+weights");
  for (std::int64_t s = 0; s < steps; ++s)
    if ((s + 1) % 25 == 0 || s == 0)
      fmt::print("{:>6} {:>10.4f} {:>16.4f} {:>22.4f}\n", s + 1, fp32.losses[s], mixed.losses[s],
                 bf16_weights.losses[s]);
  fmt::print("weights stored in bfloat16: {:.1f}% of the weight updates were rounded away\n", 100 * bf16_weights.lost);
  sf::demo::write_output(
      common.out, "11_loss_curves.svg",
      sf::demo::line_chart_svg({{"float32", fp32.losses},
                                {"bfloat16 autocast, float32 weights", mixed.losses},
                                {"bfloat16 autocast, bfloat16 weights", bf16_weights.losses}},
                               "toy pairs: training loss by precision", "step", "loss (label-smoothed)"));
  return 0;
}

// 6. Autocast's placement, drawn from the graph it records: chapter 04's feed-forward and a loss under
// AutocastGuard. The casts to bfloat16 (amber) feed each product; the product, the bias, ReLU and the loss are
// float32, and so are the parameters (the master weights) their gradients flow back to.
void autocast_graph(const sf::demo::CommonOptions& common) {
  fmt::print("== 6. the graph autocast records for chapter 04's feed-forward (D 4, F 8) and a loss\n");
  sf::Generator gen(common.seed);
  PositionwiseFeedForward ffn(4, 8, 0.0, gen);
  ffn.w_1->weight.set_name("w_1.weight"), ffn.w_1->bias.set_name("w_1.bias");
  ffn.w_2->weight.set_name("w_2.weight"), ffn.w_2->bias.set_name("w_2.bias");
  const sf::Tensor x = sf::randn({2, 3, 4}, gen);
  sf::Tensor loss;
  {
    const sf::AutocastGuard autocast(sf::DType::bfloat16);
    const sf::Tensor y = ffn(x);
    loss = sf::mean(y * y).set_name("loss");
  }
  sf::demo::draw_dot(common.out, "11_autocast_graph", sf::to_dot(loss));
}

}  // namespace

int main(int argc, char** argv) {
  sf::demo::CommonOptions common;
  CLI::App app{"11_mixed_precision: bfloat16 formats, rounding, accumulation, and training in mixed precision"};
  app.option_defaults()->always_capture_default();  // --help shows every default
  sf::demo::add_common_options(app, common);
  CLI11_PARSE(app, argc, argv);
  try {
    formats();
    rounding();
    accumulation();
    const int status = training(common);
    autocast_graph(common);
    return status;
  } catch (const std::exception& e) {
    return stepformer::demo::report_error("11_mixed_precision", e);
  }
}
