// Chapter 02 — attention. Read docs/02_attention.md beside this file.
// Runs multi-head self-attention over the seed's toy sentence and shows, per head, the attention weights
// without a mask, with the pad mask and with the subsequent (causal) mask; writes one heatmap per head.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cmath>

#include "architecture.h"
#include "autograd/ops.h"
#include "demo.h"
#include "transformer/attention.h"
#include "transformer/embedding.h"
#include "transformer/model.h"

namespace sf = stepformer;
using namespace stepformer::transformer;

namespace {

// Attention on three positions with two dimensions, every intermediate printed: what the docs work by hand.
void three_by_three() {
  const sf::Tensor q = sf::from_vector(std::vector<double>{1, 0, 0, 1, 1, 1}, {1, 1, 3, 2});  // [B, H, T, d_k]
  const sf::Tensor k = q;  // self-attention with identity projections: queries and keys are the same vectors
  const sf::Tensor v = sf::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {1, 1, 3, 2});
  auto as_matrix = [](const sf::Tensor& t) { return sf::reshape(t, {t.size(2), t.size(3)}); };
  const std::vector<std::string> pos{"0", "1", "2"}, dims{"d0", "d1"};
  fmt::print("== attention on 3 positions by hand: Q = K (rows are positions), V, d_k = 2\n");
  fmt::print("Q = K\n{}V\n{}", sf::demo::format_matrix(as_matrix(q), pos, dims),
             sf::demo::format_matrix(as_matrix(v), pos, dims));
  const sf::Tensor scores = sf::matmul(q, sf::transpose(k, -2, -1));
  fmt::print("Q K^T (query rows, key columns)\n{}", sf::demo::format_matrix(as_matrix(scores), pos, pos));
  fmt::print("/ sqrt(2)\n{}", sf::demo::format_matrix(as_matrix(scores / std::sqrt(2.0)), pos, pos));
  for (const bool causal : {false, true}) {
    const Attention a = scaled_dot_product_attention(q, k, v, causal ? subsequent_mask(3) : sf::Tensor{});
    fmt::print("softmax over each row{}\n{}", causal ? ", keys after the query blocked (-inf)" : "",
               sf::demo::format_matrix(as_matrix(a.weights.tensor()), pos, pos));
    fmt::print("weights V{}\n{}", causal ? " (causal)" : "", sf::demo::format_matrix(as_matrix(a.context), pos, dims));
  }
  // The softmax's backward on row 0 (docs/02, "The softmax's gradient"): with dL/dp = (1, 0, 0), the
  // formula ds = p * (dp - p . dp) beside the engine's gradient.
  const sf::Tensor s0 = sf::narrow(as_matrix(scores / std::sqrt(2.0)), 0, 0, 1).detach().set_requires_grad();  // [1, 3]
  const sf::Tensor p0 = sf::softmax(s0, -1);
  const std::vector<double> p = p0.to_vector<double>(), dp{1, 0, 0};
  const double p_dot_dp = p[0] * dp[0] + p[1] * dp[1] + p[2] * dp[2];
  sf::sum(p0 * sf::from_vector(dp, {1, 3})).backward();
  const std::vector<double> engine = s0.grad().to_vector<double>();
  fmt::print("softmax backward, row 0: p = ({:.2f}, {:.2f}, {:.2f}), dL/dp = (1, 0, 0)\n", p[0], p[1], p[2]);
  fmt::print(
      "  p * (dp - p . dp) = ({:.4f}, {:.4f}, {:.4f}); the engine's dL/ds = ({:.4f}, {:.4f}, {:.4f}); sum {:.4f}\n\n",
      p[0] * (dp[0] - p_dot_dp), p[1] * (dp[1] - p_dot_dp), p[2] * (dp[2] - p_dot_dp), engine[0], engine[1], engine[2],
      engine[0] + engine[1] + engine[2]);
}

// Why 1/sqrt(d_k) (section 3.2.1): for q and k with independent unit-variance entries, q . k has variance
// d_k, so unscaled scores spread wider as d_k grows and the softmax saturates: one weight near 1, the
// others near 0, and gradients near 0. Measured over rows of 8 keys.
void scaling(const sf::demo::CommonOptions& common) {
  sf::Generator gen(common.seed);
  const std::int64_t rows = 2000, keys = 8;
  std::vector<double> d_ks, max_unscaled, max_scaled;
  fmt::print("== why divide by sqrt(d_k): {} rows of {} keys, q and k entries N(0, 1)\n", rows, keys);
  fmt::print("  d_k   var(q.k)  var(q.k / sqrt(d_k))   mean largest weight: unscaled  scaled\n");
  for (std::int64_t d_k = 1; d_k <= 256; d_k *= 2) {
    const sf::Tensor q = sf::randn({rows, 1, d_k}, gen), k = sf::randn({rows, keys, d_k}, gen);
    const sf::Tensor scores = sf::matmul(q, sf::transpose(k, -2, -1));  // [rows, 1, keys]
    const sf::Tensor scaled = scores / std::sqrt(static_cast<double>(d_k));
    auto variance = [](const sf::Tensor& t) {
      const sf::Tensor c = t - sf::mean(t);
      return sf::mean(c * c).item();
    };
    auto largest = [](const sf::Tensor& t) { return sf::mean(sf::max(sf::softmax(t, -1), {-1})).item(); };
    d_ks.push_back(static_cast<double>(d_k));
    max_unscaled.push_back(largest(scores));
    max_scaled.push_back(largest(scaled));
    fmt::print("  {:3d}   {:8.1f}  {:20.2f}   {:29.2f}  {:6.2f}\n", d_k, variance(scores), variance(scaled),
               max_unscaled.back(), max_scaled.back());
  }
  sf::demo::write_output(
      common.out, "02_softmax_saturation.svg",
      sf::demo::line_chart_svg(
          {{"softmax(q.k): unscaled", max_unscaled, d_ks}, {"softmax(q.k / sqrt(d_k)): the paper", max_scaled, d_ks}},
          "mean largest attention weight in a row of 8 keys", "d_k", "largest weight"));
  fmt::print("\n");
}

// FlashAttention's idea on one query: its scores arrive a tile at a time, and a running max m, a running sum l
// and a running (unnormalised) output are enough; when a tile raises the max, what came before is rescaled by
// exp(m_old - m_new). The end result is the softmax-weighted sum over all keys, without keeping the row.
// Then the tiles of a causal [1024, 1024] attention: which are computed, masked inside, or skipped.
void online_softmax(const sf::demo::CommonOptions& common) {
  const std::vector<double> s{0.3, 1.2, -0.4, 0.8, 2.1, 0.1, 1.7, -1.0}, v{1, 2, 3, 4, 5, 6, 7, 8};
  fmt::print("== attention without the [T, T] matrix: the online softmax of one query (FlashAttention)\n");
  fmt::print("scores s = [{}], values v = [{}] (one number per key), two tiles of 4 keys\n", fmt::join(s, ", "),
             fmt::join(v, ", "));
  double m = -INFINITY, l = 0, out = 0;
  for (std::size_t t = 0; t < 2; ++t) {
    double tile_max = -INFINITY;
    for (std::size_t j = 4 * t; j < 4 * t + 4; ++j) tile_max = std::max(tile_max, s[j]);
    const double m_new = std::max(m, tile_max), rescale = std::exp(m - m_new);
    l *= rescale, out *= rescale;
    for (std::size_t j = 4 * t; j < 4 * t + 4; ++j) l += std::exp(s[j] - m_new), out += std::exp(s[j] - m_new) * v[j];
    fmt::print(
        "  tile {}: max {:.1f} -> m = {:.1f}, earlier l and out times exp(m_old - m) = {:.4f}; l = {:.4f}, "
        "out = {:.4f}\n",
        t + 1, tile_max, m_new, rescale, l, out);
    m = m_new;
  }
  double total = 0, want = 0;
  for (std::size_t j = 0; j < s.size(); ++j) total += std::exp(s[j]);
  for (std::size_t j = 0; j < s.size(); ++j) want += std::exp(s[j]) / total * v[j];
  fmt::print("  out / l = {:.6f}; softmax(s) . v over the whole row = {:.6f}; lse = m + log l = {:.4f}\n", out / l,
             want, m + std::log(l));

  const std::int64_t T = 1024, tile = 128, n = T / tile;  // the CPU backend's tile (backends/cpu/attention.cpp)
  std::vector<double> state;
  std::vector<std::string> rows, cols;
  for (std::int64_t i = 0; i < n; ++i) {
    rows.push_back(fmt::format("q {}-{}", i * tile, i * tile + tile - 1));
    cols.push_back(fmt::format("k {}", i * tile));
    for (std::int64_t j = 0; j < n; ++j) state.push_back(j > i ? 0.0 : j == i ? 0.5 : 1.0);
  }
  sf::demo::write_output(common.out, "02_flash_tiles.svg",
                         sf::demo::heatmap_svg(sf::from_vector(state, {n, n}), rows, cols,
                                               "causal T = 1024 in 128 x 128 tiles: computed, masked inside, skipped"));
  fmt::print("causal T = {} in {} x {} tiles: {} computed whole, {} masked inside (the diagonal), {} skipped\n\n", T,
             tile, tile, n * (n - 1) / 2, n, n * (n - 1) / 2);
}

}  // namespace

int main(int argc, char** argv) try {
  sf::demo::CommonOptions common;
  std::int64_t d_model = 32, heads = 4;
  CLI::App app{"02_attention: scaled dot-product and multi-head attention, pad and subsequent masks"};
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.add_option("--d-model", d_model, "model size")->capture_default_str()->check(CLI::Range(2, 1024));
  app.add_option("--heads", heads, "attention heads (must divide d-model)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  sf::demo::add_common_options(app, common);
  CLI11_PARSE(app, argc, argv);

  three_by_three();
  scaling(common);
  online_softmax(common);

  const auto& data = sf::demo::toy_data();
  Config cfg;
  cfg.src_vocab = static_cast<std::int64_t>(data.src_vocab.size());
  cfg.d_model = d_model;
  cfg.max_len = 16;
  cfg.dropout = 0.0;
  sf::Generator gen(common.seed);
  TransformerEmbedding embed(cfg.src_vocab, cfg, gen);
  MultiHeadAttention mha(d_model, heads, 0.0, gen);
  // The full model's initialisation (chapter 07's Transformer), so that these pictures show what training
  // starts from.
  glorot_init(embed, gen);
  glorot_init(mha, gen);

  const sf::Tensor ids = sf::narrow(data.src_ids(), 0, 0, 1);  // [1, 8]: 我 有 一 个 好 朋 友 P
  const auto& words = data.src[0];
  const sf::Tensor x = embed.forward(ids);  // [1, 8, D]
  fmt::print("sentence: {}   (P is padding)\n", fmt::join(words, " "));
  fmt::print("x {} -> Q, K, V {} each, split into {} heads of {} -> weights [1, {}, 8, 8]\n\n",
             sf::to_string(x.shape()), sf::to_string(x.shape()), heads, d_model / heads, heads);

  cfg.n_heads = heads;
  sf::demo::draw_dot(common.out, "02_multi_head", sf::demo::multi_head_figure(cfg, {"1", "8", "8"}));

  const sf::Tensor pad = pad_mask(ids, cfg.pad_id);  // [1, 1, 1, 8]
  const sf::Tensor causal = subsequent_mask(8);      // [1, 1, 8, 8]
  const struct {
    const char* name;
    sf::Tensor blocked;
  } variants[] = {{"no mask", {}}, {"pad mask", pad}, {"subsequent mask", causal}};
  mha.need_weights = true;  // the composite, which keeps the weights this section draws
  for (const auto& variant : variants) {
    const sf::Tensor w = mha.forward(x, x, x, variant.blocked).weights.tensor();  // [1, H, 8, 8]
    fmt::print("== head 0, {}: row = query, column = key; rows sum to 1\n", variant.name);
    const sf::Tensor head0 = sf::reshape(sf::narrow(w, 1, 0, 1), {8, 8});
    fmt::print("{}\n", sf::demo::format_matrix(head0, words, words));
    for (std::int64_t h = 0; h < heads; ++h) {
      const sf::Tensor m = sf::reshape(sf::narrow(w, 1, h, 1), {8, 8});
      std::string slug = variant.name;
      std::replace(slug.begin(), slug.end(), ' ', '_');
      sf::demo::write_output(common.out, fmt::format("02_attention_{}_head{}.svg", slug, h),
                             sf::demo::heatmap_svg(m, words, words, fmt::format("head {}, {}", h, variant.name)));
    }
  }
  fmt::print(
      "With the pad mask the P column is exactly 0; with the subsequent mask everything above the\n"
      "diagonal is exactly 0 (a query never sees a later key).\n\n");
  // Without need_weights the module calls flash_attention: the same context, no weights kept.
  const sf::Tensor composite = mha.forward(x, x, x, causal).context;
  mha.need_weights = false;
  const Attention flash = mha.forward(x, x, x, causal);
  fmt::print(
      "flash attention (the module's default) against the composite, subsequent mask: max |diff| {:.1e}, "
      "weights kept: {}\n",
      sf::max(sf::relu(flash.context - composite) + sf::relu(composite - flash.context)).item(),
      flash.weights.kept() ? "yes" : "none");
  return 0;
} catch (const std::exception& e) {
  return stepformer::demo::report_error("02_attention", e);
}
