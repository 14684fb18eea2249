// The 07 demo's training run around the Trainer: see training.h.
#include "training.h"

#include <algorithm>
#include <cstdio>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "transformer/decoding.h"

namespace ch07 {

void write_pictures(const Options& o, const std::string& task, const Curves& curves, Transformer& model,
                    const Pair& sample, const Vocabulary& sv, const Vocabulary& tv) {
  std::vector<sf::demo::Series> series{{"training loss (label-smoothed)", curves.train, curves.train_steps}};
  if (!curves.valid.empty()) series.push_back({"validation loss", curves.valid, curves.valid_steps});
  sf::demo::write_output(o.common.out, "07_" + task + "_loss.svg",
                         sf::demo::line_chart_svg(series, task + ": loss per target token", "step", "loss"));
  // Cross-attention of the last decoder layer for one sample, averaged over heads.
  model.eval();
  sf::NoGradGuard no_grad;
  keep_attention_weights(*model.decoder);  // the [T, S] weights this picture draws (flash attention stores none)
  const Batch b = make_batch({sample}, sv, tv);
  const DecoderOutput dec = (*model.decoder)(b.tgt_in, model.encode(b.src));
  const sf::Tensor w = sf::mean(dec.cross_attention.back().tensor(), {1});  // [1, T, S]
  keep_attention_weights(*model.decoder, false);
  std::vector<std::string> rows{"<bos>"};
  rows.insert(rows.end(), sample.tgt.begin(), sample.tgt.end());
  sf::demo::write_output(o.common.out, "07_" + task + "_attention.svg",
                         sf::demo::heatmap_svg(sf::reshape(w, {w.size(1), w.size(2)}), rows, sample.src,
                                               task + ": cross-attention of the last layer (mean of heads)"));
}

// Sources, translations and whether each equals its reference; columns as wide as the longest entry (in
// bytes; CJK is wider).
void print_table(const std::vector<Pair>& pairs, const std::vector<std::vector<std::string>>& out,
                 const std::string& src_separator) {
  std::size_t width = 16, out_width = 24;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    width = std::max(width, join(pairs[i].src, src_separator).size());
    out_width = std::max(out_width, join(out[i]).size());
  }
  fmt::print("  {:<{}} {:<{}} {}\n", "source", width, "translation (greedy)", out_width, "");
  for (std::size_t i = 0; i < pairs.size(); ++i)
    fmt::print("  {:<{}} {:<{}} {}\n", join(pairs[i].src, src_separator), width, join(out[i]), out_width,
               out[i] == pairs[i].tgt ? "ok" : "expected: " + join(pairs[i].tgt));
}

void print_samples(Transformer& model, const std::vector<Pair>& pairs, const Vocabulary& sv, const Vocabulary& tv) {
  print_table(pairs, greedy_translations(model, pairs, sv, tv));
}

void save_if_asked(const Options& o, const Trainer& trainer, sf::Generator& gen, sf::Generator& data_gen) {
  if (o.save.empty()) return;
  trainer.save(o.save, {{"model", &gen}, {"data", &data_gen}});
  fmt::print("wrote {}\n", o.save.string());
}

// Greedy decoding of one source, one Decoder::step at a time, drawing what the KV cache holds at each step:
// the keys and values of earlier positions are read from it, only the newest position is projected.
void draw_kv_cache(const Options& o, Transformer& model, const Pair& sample, const Vocabulary& sv,
                   const Vocabulary& tv) {
  model.eval();
  sf::NoGradGuard no_grad;
  const Batch b = make_batch({sample}, sv, tv);
  const EncoderOutput encoded = model.encode(b.src);
  DecoderCache cache;
  std::vector<std::string> fed{"<bos>"}, rows;
  std::vector<double> cells;  // [steps, steps]: 1 read from the cache, 2 projected at this step, 0 not yet
  const std::int64_t max_steps = static_cast<std::int64_t>(sample.tgt.size()) + 1;
  std::int64_t token = Vocabulary::kBos;
  fmt::print("\n== the KV cache while decoding \"{}\" greedily\n", join(sample.src, ""));
  for (std::int64_t t = 0; t < max_steps; ++t) {
    const std::int64_t cached = cache.length;  // positions whose keys and values are already there
    const sf::Tensor logits = model.logits(model.decoder->step(
        sf::from_vector(std::vector<std::int64_t>{token}, {1, 1}, {sf::DType::int64}), encoded, cache));
    for (std::int64_t j = 0; j < max_steps; ++j) cells.push_back(j < cached ? 1.0 : j < cache.length ? 2.0 : 0.0);
    token = best_token(logits.to_vector<float>().data(), logits.size(-1));  // as greedy_decode chooses
    const std::string word = token == Vocabulary::kEos ? "<eos>" : tv.decode({token})[0];
    rows.push_back(fmt::format("step {}: {} -> {}", t + 1, fed.back(), word));
    fmt::print("  {}   (self-attention K, V of layer 0: {} cached + 1 new = {})\n", rows.back(), cached,
               cache.self_k[0].size(2));
    if (token == Vocabulary::kEos) break;
    fed.push_back(word);
  }
  const auto steps = static_cast<std::int64_t>(rows.size());
  fed.resize(static_cast<std::size_t>(max_steps), "");
  sf::demo::write_output(o.common.out, "07_kv_cache.svg",
                         sf::demo::heatmap_svg(sf::narrow(sf::from_vector(cells, {steps, max_steps}), 1, 0, steps),
                                               rows, {fed.begin(), fed.begin() + steps},
                                               "KV cache: pale = read from the cache, dark = projected at this step"));
  fmt::print("  {} steps projected {} positions' keys and values; without the cache, {}\n", steps, steps,
             steps * (steps + 1) / 2);
}

}  // namespace ch07
