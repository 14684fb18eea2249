// Chapter 12 — from the 2017 Transformer to a modern decoder-only language model. Read docs/12_modern_lm.md.
//
// 1. the data: the King James Bible (Debian's bible-kjv), whole books held out, BPE subwords;
// 2. the blocks: the 2017 block, each modern change alone, and the Llama-style block — parameters, and the KV
//    cache's bytes per token with multi-head, grouped-query and multi-query attention;
// 3. training the chosen block (--block, default llama) with a progress line (tokens/s, MFU), the validation
//    loss in nats per token and bits per byte;
// 4. samples from a prompt (temperature, top-k, top-p), and the cache's speed-up on a long sample.
// --ablation: every block, --seeds seeds each, the same steps: a table and the validation curves.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <cmath>

#include "architecture.h"
#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "lm_run.h"

using namespace ch12;

namespace {
void blocks(const Options& o, std::int64_t vocab) {
  fmt::print("\nthe blocks at this size (D {}, {} layers, {} heads, vocabulary {}):\n", o.d_model, o.layers, o.heads,
             vocab);
  for (const std::string& name : lm_config_names()) {
    sf::Generator gen(0);
    const LMConfig cfg = config_for(o, name, vocab);
    const LanguageModel model(cfg, gen);
    fmt::print("  {:<14} {:>9} parameters  KV cache {:>6} bytes/token  ({} key/value heads)\n", name,
               model.parameter_count(), kv_cache_bytes_per_token(cfg), cfg.n_kv_heads);
  }
}

// RoPE's picture: the score (R_m q) . (R_n k) of a query at position m and a key at n <= m, against the distance
// m - n, for two query positions, drawn with transformer::rope itself (q = k = ones: every pair counts alike;
// head size 32, the default model's, whatever the options, so that the doc's copy is checked by CI's small run).
// The two curves are one: the score depends on the distance only. It also falls, unevenly, with the distance
// (RoFormer section 3.4.3: the pairs' slow and fast rotations stop agreeing).
void rope_picture(const std::filesystem::path& out) {
  const std::int64_t head_dim = 32, span = 128;
  const sf::Tensor ones = sf::ones({1, 1, 1, head_dim});
  std::vector<sf::demo::Series> curves;
  for (const std::int64_t m : {span, 8 * span}) {
    const sf::Tensor q = rope(ones, m);
    sf::demo::Series curve{fmt::format("query at position {}", m), {}};
    for (std::int64_t d = 0; d <= span; ++d) {
      curve.values.push_back(sf::sum(q * rope(ones, m - d)).item());
      curve.x.push_back(static_cast<double>(d));
    }
    curves.push_back(std::move(curve));
  }
  sf::demo::write_output(out, "12_rope.svg",
                         sf::demo::line_chart_svg(curves, "RoPE: the score of q and k by their distance (head size 32)",
                                                  "distance m - n (tokens)", "(R_m q) . (R_n k), q = k = ones"));
}

// The derivations of docs/12_modern_lm.md worked on small numbers: each formula computed by hand beside the engine.
void worked_examples() {
  fmt::print("== the chapter's formulas on small numbers (docs/12_modern_lm.md)\n");
  const sf::Options f64{sf::DType::float64};
  {  // RMSNorm of z = [1, 2, 3, 4], g = 1: y = z / r, dz = (u - y mean(u y)) / r with u = dy g
    const std::vector<double> z{1, 2, 3, 4}, dy{1, 0, 0, 0};
    const sf::Tensor zt = sf::from_vector(z, {1, 4}).set_requires_grad();  // float32, as the model
    RMSNorm norm(4);
    const sf::Tensor y = norm(zt);
    sf::sum(y * sf::from_vector(dy, {1, 4})).backward();
    const double r = std::sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-5);
    double mean_uy = 0;
    for (int i = 0; i < 4; ++i) mean_uy += dy[i] * z[i] / r / 4;
    std::vector<double> dz;
    for (int i = 0; i < 4; ++i) dz.push_back((dy[i] - z[i] / r * mean_uy) / r);
    fmt::print(
        "RMSNorm([1, 2, 3, 4]): r = {:.4f}, y = {:.4f}; with dL/dy = (1, 0, 0, 0): by hand dL/dz = {:.4f}, "
        "engine {:.4f}\n",
        r, fmt::join(y.to_vector<double>(), " "), fmt::join(dz, " "), fmt::join(zt.grad().to_vector<double>(), " "));
  }
  {  // RoPE on one pair (head size 2, theta = 1): (R_m q) . (R_n k) = cos((m - n) theta) for q = k = (1, 0)
    const sf::Tensor e = sf::from_vector(std::vector<double>{1, 0}, {1, 1, 1, 2}, f64);
    const auto score = [&](std::int64_t m, std::int64_t n) { return sf::sum(rope(e, m) * rope(e, n)).item(); };
    fmt::print(
        "RoPE, q = k = (1, 0), head size 2: score(m 5, n 3) = {:.4f}, score(m 12, n 10) = {:.4f}, cos(2) = {:.4f}\n",
        score(5, 3), score(12, 10), std::cos(2.0));
  }
  {  // SwiGLU on one unit: h = silu(a) b; dh/da = b silu'(a), silu'(a) = s (1 + a (1 - s)), dh/db = silu(a)
    const sf::Tensor a = sf::from_vector(std::vector<double>{1}, {1}, f64).set_requires_grad();
    const sf::Tensor b = sf::from_vector(std::vector<double>{2}, {1}, f64).set_requires_grad();
    const sf::Tensor h = sf::swiglu(a, b);
    sf::sum(h).backward();
    const double s = 1 / (1 + std::exp(-1.0));
    fmt::print(
        "SwiGLU, gate a = 1, value b = 2: h = silu(1) 2 = {:.4f}; by hand dh/da = {:.4f}, dh/db = {:.4f}; engine "
        "{:.4f}, {:.4f}\n\n",
        h.item(), 2 * s * (1 + 1 * (1 - s)), 1 * s, a.grad().item(), b.grad().item());
  }
}

// The KV cache while generating, read from a real cache (LayerCache) of the default Llama-style model (untrained:
// only the cache's bookkeeping is drawn): one row per forward call, one column per position of the buffer, which
// make_cache allocated once at the capacity. Dark: the rows that call wrote; pale: the rows it read, written before;
// white: not written yet. Default sizes whatever the options, so that the doc's copy is checked by CI's small run.
void kv_cache_picture(const std::filesystem::path& out) {
  const Options defaults;
  sf::Generator gen(1);
  LanguageModel model(config_for(defaults, "llama", defaults.vocab), gen);
  model.eval();
  const sf::NoGradGuard no_grad;
  const std::vector<std::int64_t> prompt{1, 2, 3, 4};
  const std::int64_t generated = 8, capacity = static_cast<std::int64_t>(prompt.size()) + generated;
  KVCache cache = model.make_cache(capacity);
  std::vector<double> state;
  std::vector<std::string> rows, cols;
  for (std::int64_t t = 0; t < capacity; ++t) cols.push_back(std::to_string(t));
  std::vector<std::int64_t> feed = prompt;
  while (cache.length() < capacity) {
    const std::int64_t before = cache.length(), T = static_cast<std::int64_t>(feed.size());
    model(sf::from_vector(feed, {1, T}, {sf::DType::int64}), &cache);
    rows.push_back(before == 0 ? fmt::format("prompt, {} tokens", T) : fmt::format("token at {}", before));
    for (std::int64_t t = 0; t < capacity; ++t) state.push_back(t < before ? 0.35 : t < cache.length() ? 1.0 : 0.0);
    feed = {5};
  }
  const sf::Tensor keys = cache.layers[0].keys();
  sf::demo::write_output(
      out, "12_kv_cache.svg",
      sf::demo::heatmap_svg(sf::from_vector(state, {static_cast<std::int64_t>(rows.size()), capacity}), rows, cols,
                            fmt::format("one layer's KV cache, keys [1, {}, {}, {}]: rows each call wrote (dark), "
                                        "kept from before (pale), free (white)",
                                        keys.size(1), cache.layers[0].capacity(), keys.size(3))));
}

// The two ends of the chapter as block diagrams, at the default options' sizes whatever the options (so that the
// doc's copies are checked by CI's small run): the 2017 block and the Llama-style one.
void block_pictures(const std::filesystem::path& out) {
  const Options defaults;
  for (const std::string name : {"2017", "llama"})
    sf::demo::draw_dot(
        out, "12_" + name + "_model",
        sf::demo::language_model_figure(config_for(defaults, name, defaults.vocab),
                                        {std::to_string(defaults.batch), "", std::to_string(defaults.seq_len)}));
}
}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"12_modern_lm: a decoder-only language model on the King James Bible, from the 2017 block to Llama's"};
  app.option_defaults()->always_capture_default();  // --help shows every default
  sf::demo::add_common_options(app, o.common);
  add_model_options(app, o);
  app.add_option("--steps", o.steps, "optimizer steps")->check(CLI::PositiveNumber);
  app.add_option("--precision", o.precision, "fp32, or bf16 autocast (chapter 11)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--valid-every", o.valid_every, "steps between validations")->check(CLI::PositiveNumber);
  app.add_option("--prompt", o.prompt, "the samples' prompt");
  app.add_option("--sample-tokens", o.sample_tokens, "tokens per sample")->check(CLI::NonNegativeNumber);
  app.add_option("--timed-tokens", o.timed_tokens, "tokens of the sample timed with and without the KV cache")
      ->check(CLI::PositiveNumber);
  app.add_option("--temperature", o.sampling.temperature, "0: greedy")->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", o.sampling.top_k, "0: all tokens")->check(CLI::NonNegativeNumber);
  app.add_option("--top-p", o.sampling.top_p, "the nucleus")->check(CLI::Range(1e-9, 1.0));
  app.add_flag("--ablation", o.ablation, "train every block, --seeds seeds each, and compare");
  app.add_option("--seeds", o.seeds, "seeds per block in the ablation")->check(CLI::PositiveNumber);
  app.add_option("--blocks", o.blocks, "the ablation's blocks (default all; none: only gather the runs in --out)")
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  try {
    check_model_options(o);
    if (o.ablation && o.blocks == std::vector<std::string>{"none"}) {
      ablation(o, nullptr);  // gather the runs already in --out
      return 0;
    }
    const Corpus corpus = load_corpus(o);
    worked_examples();
    blocks(o, corpus.vocab.size());
    rope_picture(o.common.out);
    kv_cache_picture(o.common.out);
    block_pictures(o.common.out);
    if (o.ablation) {
      ablation(o, &corpus);
      return 0;
    }
    sf::Generator gen(o.common.seed);
    LanguageModel model(config_for(o, o.block, corpus.vocab.size()), gen);
    fmt::print("\ntraining {} ({} parameters) for {} steps of {} x {} tokens, {}\n", o.block, model.parameter_count(),
               o.steps, o.batch, o.seq_len, o.precision);
    const Run run = train_run(o, corpus, model, o.common.seed, true);
    fmt::print("\ntrained in {:.0f}s: {:.0f} tok/s; validation {:.3f} nats/token, {:.3f} bits/byte\n", run.seconds,
               run.tokens_per_s, run.valid.back(), run.valid_bpb.back());
    sf::demo::write_output(
        o.common.out, "12_" + o.block + "_loss.svg",
        sf::demo::line_chart_svg({{"training loss", run.train}, {"validation loss", run.valid, run.valid_steps}},
                                 o.block + ": nats per token", "step", "loss"));
    sample_and_time(o, corpus, model);
    return 0;
  } catch (const std::exception& e) {
    return stepformer::demo::report_error("12_modern_lm", e);
  }
}
