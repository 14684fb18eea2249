// Chapter 02 — attention. Read docs/02_attention.md beside this file.
// Runs multi-head self-attention over the seed's toy sentence and shows, per head, the attention weights
// without a mask, with the pad mask and with the subsequent (causal) mask; writes one heatmap per head.
#include <fmt/format.h>

#include "autograd/ops.h"
#include "demo.h"
#include "transformer/attention.h"
#include "transformer/embedding.h"

namespace sf = stepformer;
using namespace stepformer::transformer;

int main(int argc, char** argv) {
  sf::demo::CommonOptions common;
  std::int64_t d_model = 32, heads = 4;
  CLI::App app{"02_attention: scaled dot-product and multi-head attention, pad and subsequent masks"};
  app.add_option("--d-model", d_model, "model size")->capture_default_str()->check(CLI::Range(2, 1024));
  app.add_option("--heads", heads, "attention heads (must divide d-model)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  sf::demo::add_common_options(app, common);
  CLI11_PARSE(app, argc, argv);

  const auto& data = sf::demo::toy_data();
  Config cfg;
  cfg.src_vocab = static_cast<std::int64_t>(data.src_vocab.size());
  cfg.d_model = d_model;
  cfg.max_len = 16;
  cfg.dropout = 0.0;
  sf::Generator gen(common.seed);
  TransformerEmbedding embed(cfg.src_vocab, cfg, gen);
  MultiHeadAttention mha(d_model, heads, 0.0, gen);

  const sf::Tensor ids = sf::narrow(data.src_ids(), 0, 0, 1);  // [1, 8]: 我 有 一 个 好 朋 友 P
  const auto& words = data.src[0];
  const sf::Tensor x = embed.forward(ids);  // [1, 8, D]
  fmt::print("sentence: {}   (P is padding)\n", fmt::join(words, " "));
  fmt::print("x {} -> Q, K, V {} each, split into {} heads of {} -> weights [1, {}, 8, 8]\n\n",
             sf::to_string(x.shape()), sf::to_string(x.shape()), heads, d_model / heads, heads);

  const sf::Tensor pad = pad_mask(ids, cfg.pad_id);  // [1, 1, 1, 8]
  const sf::Tensor causal = subsequent_mask(8);      // [1, 1, 8, 8]
  const struct {
    const char* name;
    sf::Tensor blocked;
  } variants[] = {{"no mask", {}}, {"pad mask", pad}, {"subsequent mask", causal}};
  for (const auto& variant : variants) {
    const sf::Tensor w = mha.forward(x, x, x, variant.blocked).weights;  // [1, H, 8, 8]
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
      "diagonal is exactly 0 (a query never sees a later key).\n");
  return 0;
}
