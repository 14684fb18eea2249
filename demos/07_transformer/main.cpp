// Chapter 07 — the full Transformer, trained and decoding. Read docs/07_transformer.md beside this file.
//
//   07_transformer            the toy pairs to exact translations, then the numerals task (the README's demo)
//   07_transformer toy        seed 000's three zh -> en pairs (docs/seeds.md)
//   07_transformer numerals   Chinese numerals -> English words, scored on held-out numbers
//   07_transformer freedict   German -> English phrases from Debian's dict-freedict-deu-eng, test BLEU
//   07_transformer translate --load FILE [--task freedict]   read stdin, print translations and attention
#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "cpu/peak.h"
#include "demo.h"
#include "transformer/bleu.h"
#include "transformer/decoding.h"
#include "transformer/flops.h"
#include "transformer/freedict.h"
#include "transformer/subwords.h"
#include "transformer/train.h"

namespace sf = stepformer;
using namespace stepformer::transformer;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  sf::demo::CommonOptions common;
  std::int64_t steps = 0;  // 0: the task's default
  std::int64_t batch = 64;
  double lr_factor = 0;     // 0: the task's default
  std::int64_t warmup = 0;  // 0: the task's default
  std::int64_t d_model = 64, layers = 2, heads = 4, d_ff = 256;
  double dropout = -1;  // < 0: the task's default (toy 0.1; numerals 0, its data is unlimited)
  int threads = 0;      // 0: OpenMP's default
  std::filesystem::path save, load;
  std::filesystem::path dict = kFreedictDeuEng;
  std::string task = "numerals";     // translate: which task's checkpoint --load holds
  std::string tokens = "bpe";        // freedict: words, bpe or unigram
  int vocab = 4000;                  // freedict: SentencePiece pieces per language (or in all, joint)
  bool joint_vocab = false;          // freedict: one SentencePiece model for German and English
  bool tie_output = false;           // freedict, translate: the output projection is the target embedding (3.4)
  std::filesystem::path export_dir;  // freedict: write the tokenised splits for tools/compare/torch_freedict.py
  std::vector<std::filesystem::path> bleu_files;  // bleu: REFERENCES TRANSLATIONS
  std::int64_t batch_tokens = 0;                  // freedict: padded positions per batch (0: --batch pairs per batch)
  std::int64_t average = 0;  // freedict: average the weights of the last N checkpoints, 500 steps apart
  std::int64_t beam = 4;     // freedict: beam width of the second BLEU (0 or 1: greedy only)
  double alpha = 0.6;        // freedict: GNMT length penalty of the beam search
};

Config model_config(const Options& o, const Vocabulary& sv, const Vocabulary& tv) {
  Config c;
  c.src_vocab = sv.size();
  c.tgt_vocab = tv.size();
  c.n_layers = o.layers;
  c.d_model = o.d_model;
  c.d_ff = o.d_ff;
  c.n_heads = o.heads;
  c.dropout = o.dropout;  // resolved by the task before this is called
  c.max_len = 64;
  c.pad_id = Vocabulary::kPad;
  return c;
}

std::string duration(double seconds) {
  const auto s = static_cast<long>(seconds);
  return s >= 60 ? fmt::format("{}m{:02d}s", s / 60, s % 60) : fmt::format("{}s", s);
}

// One line per report on a pipe (CI logs), a redrawn bar on a terminal.
// MFU: the model FLOPs done (transformer/flops.h) per second over the machine's measured peak (cpu/peak.h).
void progress(std::int64_t step, std::int64_t total, double loss, double tokens_per_s, double flops_per_s,
              double elapsed, const std::string& extra) {
  static const bool tty = isatty(STDOUT_FILENO);
  const int filled = static_cast<int>(30.0 * static_cast<double>(step) / static_cast<double>(total));
  const double eta = elapsed / static_cast<double>(step) * static_cast<double>(total - step);
  // The peak is the CPU's; on another device the line shows no MFU rather than a wrong one.
  static const double peak = sf::default_device() == sf::kCPU ? sf::cpu::peak_flops(0) : 0;
  const std::string mfu = peak > 0 ? fmt::format("  MFU {:4.1f}%", 100 * flops_per_s / peak) : "";
  fmt::print("{}[{}{}] step {:5d}/{}  loss {:.3f}  {:6.0f} tok/s{}  ETA {:>6}{}{}", tty ? "\r" : "",
             std::string(filled, '#'), std::string(30 - filled, '.'), step, total, loss, tokens_per_s, mfu,
             duration(eta), extra, tty ? "" : "\n");
  std::fflush(stdout);
}

// The losses of a run: the training loss of every step (label-smoothed, so it levels off above 0) and the
// validation loss every few steps (no smoothing, no dropout: it can approach 0).
struct Curves {
  std::vector<double> train, train_steps, valid, valid_steps;  // no train_steps: steps 1, 2, ...
};

void write_pictures(const Options& o, const std::string& task, const Curves& curves, Transformer& model,
                    const Pair& sample, const Vocabulary& sv, const Vocabulary& tv) {
  std::vector<sf::demo::Series> series{{"training loss (label-smoothed)", curves.train, curves.train_steps}};
  if (!curves.valid.empty()) series.push_back({"validation loss", curves.valid, curves.valid_steps});
  sf::demo::write_output(o.common.out, "07_" + task + "_loss.svg",
                         sf::demo::line_chart_svg(series, task + ": loss per target token", "step", "loss"));
  // Cross-attention of the last decoder layer for one sample, averaged over heads.
  model.eval();
  sf::NoGradGuard no_grad;
  const Batch b = make_batch({sample}, sv, tv);
  const DecoderOutput dec = (*model.decoder)(b.tgt_in, model.encode(b.src));
  const sf::Tensor w = sf::mean(dec.cross_attention.back(), {1});  // [1, T, S]
  std::vector<std::string> rows{"<bos>"};
  rows.insert(rows.end(), sample.tgt.begin(), sample.tgt.end());
  sf::demo::write_output(o.common.out, "07_" + task + "_attention.svg",
                         sf::demo::heatmap_svg(sf::reshape(w, {w.size(1), w.size(2)}), rows, sample.src,
                                               task + ": cross-attention of the last layer (mean of heads)"));
}

// Sources, translations and whether each equals its reference; columns as wide as the longest entry (in
// bytes; CJK is wider).
void print_table(const std::vector<Pair>& pairs, const std::vector<std::vector<std::string>>& out,
                 const std::string& src_separator = "") {
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

// Trains until `steps` are done, one batch from next_batch() per step: a progress line every 100 steps,
// the validation loss every `valid_every` (a multiple of 100) and at the end. Returns this run's curves.
template <class NextBatch>
Curves train_steps(Trainer& trainer, Transformer& model, std::int64_t steps, const std::vector<Batch>& valid,
                   std::int64_t valid_every, NextBatch next_batch) {
  Curves curves;
  const auto start = Clock::now();
  std::int64_t tokens = 0;
  double flops = 0;
  while (trainer.steps_done() < steps) {
    const Batch b = next_batch();
    curves.train.push_back(trainer.step(b));
    tokens += b.target_tokens;
    flops += training_step_flops(model.cfg, b.src.size(0), b.src.size(1), b.tgt_in.size(1));
    const std::int64_t s = trainer.steps_done();
    curves.train_steps.push_back(static_cast<double>(s));  // a resumed run starts past step 1
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (s % 100 == 0 || s == steps) {
      std::string extra;
      if (s % valid_every == 0 || s == steps) {
        curves.valid_steps.push_back(static_cast<double>(s));
        curves.valid.push_back(evaluate_loss(model, valid));
        extra = fmt::format("  valid loss {:.3f}", curves.valid.back());
      }
      progress(s, steps, curves.train.back(), static_cast<double>(tokens) / elapsed, flops / elapsed, elapsed, extra);
    }
  }
  fmt::print("\ntrained {} steps in {}\n", curves.train.size(),
             duration(std::chrono::duration<double>(Clock::now() - start).count()));
  return curves;
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

// --- toy ----------------------------------------------------------------------------------------------
int run_toy(Options o) {
  if (o.dropout < 0) o.dropout = 0.1;
  const auto pairs = toy_pairs();
  std::vector<std::vector<std::string>> src, tgt;
  for (const auto& p : pairs) src.push_back(p.src), tgt.push_back(p.tgt);
  const Vocabulary sv = Vocabulary::build(src), tv = Vocabulary::build(tgt);
  const std::int64_t steps = o.steps ? o.steps : 150;
  sf::Generator gen(o.common.seed);
  Transformer model(model_config(o, sv, tv), gen);
  // Peak rate 0.3 * 64^-0.5 * 30^-0.5 = 0.0068. At factor 1 the loss climbed back after the warmup and 5 seeds of
  // 6 ended at 33-67% exact; at 0.5, 12 of 12 in the release build but seed 1 at 67% in the ASan build (other
  // float rounding); at 0.3, 12 of 12 and 4 of 4 (docs/07_transformer.md).
  if (o.warmup <= 0) o.warmup = 30;
  if (o.lr_factor <= 0) o.lr_factor = 0.3;
  Trainer trainer(model, {.warmup = o.warmup, .lr_factor = o.lr_factor});
  const Batch batch = make_batch(pairs, sv, tv);
  fmt::print("== toy: seed 000's 3 pairs; {} parameters; {} steps\n", model.parameter_count(), steps);
  Curves curves;
  const auto start = Clock::now();
  for (std::int64_t s = 1; s <= steps; ++s) {
    curves.train.push_back(trainer.step(batch));
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (s % 25 == 0 || s == steps)
      progress(s, steps, curves.train.back(), static_cast<double>(batch.target_tokens * s) / elapsed,
               static_cast<double>(s) *
                   training_step_flops(model.cfg, batch.src.size(0), batch.src.size(1), batch.tgt_in.size(1)) / elapsed,
               elapsed, "");
  }
  fmt::print("\n");
  print_samples(model, pairs, sv, tv);
  const double exact = exact_match(model, pairs, sv, tv);
  fmt::print("toy exact match: {:.0f}%\n", 100 * exact);
  write_pictures(o, "toy", curves, model, pairs[0], sv, tv);
  draw_kv_cache(o, model, pairs[0], sv, tv);
  return exact == 1.0 ? 0 : 1;
}

// --- numerals -----------------------------------------------------------------------------------------
int run_numerals(Options o) {
  if (o.dropout < 0) o.dropout = 0.0;
  if (o.warmup <= 0) o.warmup = 200;
  if (o.lr_factor <= 0) o.lr_factor = 1.0;
  const NumeralVocabularies vocab = numeral_vocabularies();
  const NumeralTask task(o.common.seed);
  const std::int64_t steps = o.steps ? o.steps : 5000;
  sf::Generator gen(o.common.seed), data_gen(o.common.seed + 1);
  Transformer model(model_config(o, vocab.src, vocab.tgt), gen);
  Trainer trainer(model, {.warmup = o.warmup, .lr_factor = o.lr_factor});
  if (!o.load.empty()) {
    trainer.load(o.load, {{"model", &gen}, {"data", &data_gen}});
    fmt::print("resumed from {} at step {}\n", o.load.string(), trainer.steps_done());
  }
  const auto test = task.test_set(500);
  const auto valid = make_batches(task.test_set(200), vocab.src, vocab.tgt, 100);
  fmt::print("== numerals: Chinese numerals -> English words, 1 to 99,999; {} parameters; batch {}; {} steps\n",
             model.parameter_count(), o.batch, steps);
  fmt::print("   held out: {} test numbers never used in training (e.g. {} = {})\n", test.size(), join(test[0].src, ""),
             join(test[0].tgt));
  const Curves curves = train_steps(trainer, model, steps, valid, 200, [&] {
    return make_batch(task.train_batch(o.batch, data_gen), vocab.src, vocab.tgt);
  });
  save_if_asked(o, trainer, gen, data_gen);
  print_samples(model, {test.begin(), test.begin() + 8}, vocab.src, vocab.tgt);
  const double exact = exact_match(model, test, vocab.src, vocab.tgt);
  fmt::print("numerals exact match on {} held-out numbers: {:.1f}%\n", test.size(), 100 * exact);
  write_pictures(o, "numerals", curves, model, numeral_pair(10003), vocab.src, vocab.tgt);
  return 0;
}

// --- freedict ----------------------------------------------------------------------------------------
// The recipe `./run demo freedict` trains (docs/07_transformer.md, "Real data": the measurements behind it).
struct FreedictRecipe {
  std::int64_t d_model, layers, heads, d_ff, batch_tokens, warmup, steps;
  double lr_factor, dropout;
};
constexpr FreedictRecipe kFreedictRecipe{.d_model = 128,
                                         .layers = 2,
                                         .heads = 4,
                                         .d_ff = 512,
                                         .batch_tokens = 0,
                                         .warmup = 1000,
                                         .steps = 6000,
                                         .lr_factor = 0.5,
                                         .dropout = 0.1};

// How one language's text becomes the model's tokens: words (text_tokens; words seen once become <unk>), or
// SentencePiece pieces learned from the training split (transformer/subwords.h).
struct Side {
  std::optional<Subwords> subwords;
  Vocabulary vocab;
  std::vector<std::string> tokens(const std::vector<std::string>& words) const {
    return subwords ? subwords->encode(join(words)) : words;
  }
  std::vector<std::string> words(const std::vector<std::string>& tokens) const {
    return subwords ? text_tokens(subwords->decode(tokens)) : tokens;
  }
};

// A subword checkpoint keeps its two SentencePiece models beside it: FILE.de.spm and FILE.en.spm.
std::filesystem::path subword_file(const std::filesystem::path& checkpoint, const char* language) {
  return checkpoint.string() + "." + language + ".spm";
}

struct FreedictData {
  Splits words;   // lower-cased word tokens: what BLEU scores and the samples show
  Splits tokens;  // the same pairs as the model reads and writes them
  Side src, tgt;
  static constexpr std::size_t kMaxWords = 12;

  explicit FreedictData(const Options& o) {
    if (!std::filesystem::exists(o.dict))
      throw std::invalid_argument(fmt::format(
          "{} is missing: install Debian's dict-freedict-deu-eng (`./run demo freedict` does) or pass --dict",
          o.dict.string()));
    words = split_pairs(freedict_examples(read_gzip_file(o.dict)), kMaxWords);
    if (o.tokens == "words") {
      std::vector<std::vector<std::string>> s, t;
      for (const auto& p : words.train) s.push_back(p.src), t.push_back(p.tgt);
      src.vocab = Vocabulary::build(s, 2);
      tgt.vocab = Vocabulary::build(t, 2);
    } else {  // the training split only: no valid or test sentence shapes the pieces
      std::vector<std::string> de, en;
      for (const auto& p : words.train) de.push_back(join(p.src)), en.push_back(join(p.tgt));
      const SubwordOptions so{.model_type = o.tokens, .vocab_size = o.vocab};
      if (o.joint_vocab) {
        de.insert(de.end(), en.begin(), en.end());
        src.subwords = tgt.subwords = Subwords::train(de, so);
      } else {
        src.subwords = Subwords::train(de, so);
        tgt.subwords = Subwords::train(en, so);
      }
      src.vocab = src.subwords->vocabulary();
      tgt.vocab = tgt.subwords->vocabulary();
    }
    for (auto [from, to] :
         {std::pair{&words.train, &tokens.train}, {&words.valid, &tokens.valid}, {&words.test, &tokens.test}})
      for (const Pair& p : *from) to->push_back({src.tokens(p.src), tgt.tokens(p.tgt)});
  }
};

// Translations as words, greedy (beam 0) or by beam search.
std::vector<std::vector<std::string>> translate_words(Transformer& model, const FreedictData& d,
                                                      const std::vector<Pair>& pairs, std::int64_t beam, double alpha) {
  const auto out = beam > 0 ? beam_translations(model, pairs, d.src.vocab, d.tgt.vocab, beam, alpha)
                            : greedy_translations(model, pairs, d.src.vocab, d.tgt.vocab);
  std::vector<std::vector<std::string>> words;
  for (const auto& tokens : out) words.push_back(d.tgt.words(tokens));
  return words;
}

// A model that has collapsed answers every sentence alike, most often with EOS first (an empty translation).
struct Collapse {
  double empty = 0;          // fraction of empty translations
  std::size_t distinct = 0;  // distinct translations
  bool collapsed() const { return empty > 0.5 || distinct <= 1; }
};
Collapse collapse_of(const std::vector<std::vector<std::string>>& translations) {
  std::set<std::vector<std::string>> distinct(translations.begin(), translations.end());
  const auto empty = std::count_if(translations.begin(), translations.end(), [](const auto& t) { return t.empty(); });
  return {translations.empty() ? 0.0 : static_cast<double>(empty) / static_cast<double>(translations.size()),
          distinct.size()};
}

void print_bleu(const std::string& how, std::size_t pairs, const BleuScore& bleu) {
  fmt::print(
      "freedict test BLEU ({}, {} pairs, lower-cased words): {:.2f}  (n-gram precisions {:.1f}/{:.1f}/{:.1f}/{:.1f}%, "
      "brevity penalty {:.3f})\n",
      how, pairs, bleu.bleu, 100 * bleu.precisions[0], 100 * bleu.precisions[1], 100 * bleu.precisions[2],
      100 * bleu.precisions[3], bleu.brevity_penalty);
}

// One sentence per line: {train,valid,test}.{de,en} as the model's tokens, vocab.{de,en} one token per id,
// test.ref the references as words, test.ours our greedy translations as words.
void export_data(const std::filesystem::path& dir, const FreedictData& d,
                 const std::vector<std::vector<std::string>>& greedy) {
  auto lines = [](const auto& sentences) {
    std::string text;
    for (const auto& s : sentences) text += join(s) + "\n";
    return text;
  };
  for (const auto& [name, pairs] :
       {std::pair{"train", &d.tokens.train}, {"valid", &d.tokens.valid}, {"test", &d.tokens.test}}) {
    std::vector<std::vector<std::string>> de, en;
    for (const Pair& p : *pairs) de.push_back(p.src), en.push_back(p.tgt);
    sf::demo::write_output(dir, std::string(name) + ".de", lines(de));
    sf::demo::write_output(dir, std::string(name) + ".en", lines(en));
  }
  for (const auto& [name, vocab] : {std::pair{"vocab.de", &d.src.vocab}, {"vocab.en", &d.tgt.vocab}}) {
    std::vector<std::vector<std::string>> tokens;
    for (std::int64_t id = 0; id < vocab->size(); ++id) tokens.push_back({vocab->token(id)});
    sf::demo::write_output(dir, name, lines(tokens));
  }
  std::vector<std::vector<std::string>> references;
  for (const auto& p : d.words.test) references.push_back(p.tgt);
  sf::demo::write_output(dir, "test.ref", lines(references));
  sf::demo::write_output(dir, "test.ours", lines(greedy));
}

int run_freedict(Options o) {
  const auto read_start = Clock::now();
  const FreedictData data(o);
  const auto& [train, valid, test] = data.tokens;
  const std::int64_t steps = o.steps;
  sf::Generator gen(o.common.seed), data_gen(o.common.seed + 1);
  Transformer model(model_config(o, data.src.vocab, data.tgt.vocab), gen, o.tie_output);
  Trainer trainer(model, {.warmup = o.warmup, .lr_factor = o.lr_factor});
  if (!o.load.empty()) {
    trainer.load(o.load, {{"model", &gen}, {"data", &data_gen}});
    fmt::print("resumed from {} at step {}\n", o.load.string(), trainer.steps_done());
  }
  fmt::print("== freedict: German -> English examples of {} ({:.1f} s to read and split into {})\n", o.dict.string(),
             std::chrono::duration<double>(Clock::now() - read_start).count(),
             o.tokens == "words" ? "words" : fmt::format("{} subwords{}", o.tokens, o.joint_vocab ? ", joint" : ""));
  fmt::print("   pairs of at most {} words: train {}, valid {}, test {}; vocabulary de {}, en {}\n",
             FreedictData::kMaxWords, train.size(), valid.size(), test.size(), data.src.vocab.size(),
             data.tgt.vocab.size());
  const auto batches = o.batch_tokens > 0 ? make_token_batches(train, data.src.vocab, data.tgt.vocab, o.batch_tokens)
                                          : make_batches(train, data.src.vocab, data.tgt.vocab, o.batch);
  const auto valid_batches = make_batches(valid, data.src.vocab, data.tgt.vocab, 100);
  fmt::print("   {} parameters; {} batches of {}; {} steps\n", model.parameter_count(), batches.size(),
             o.batch_tokens > 0 ? fmt::format("at most {} tokens", o.batch_tokens) : fmt::format("{} pairs", o.batch),
             steps);
  // A random batch each step; the data generator's offset is in the checkpoint, so a resume continues.
  // Checkpoint averaging (the paper, 6.1: "averaging the last 5 checkpoints"): the sum of the weights at
  // the last `average` multiples of 500 steps before the end, and at the end.
  sf::nn::StateDict weight_sum;
  std::int64_t averaged = 0;
  auto add_weights = [&] {
    sf::NoGradGuard no_grad;
    for (const auto& [name, t] : model.state_dict())
      weight_sum[name] = averaged == 0 ? t * 1.0 : sf::add(weight_sum.at(name), t);
    ++averaged;
  };
  const Curves curves = train_steps(trainer, model, steps, valid_batches, 500, [&] {
    const std::int64_t done = trainer.steps_done(), left = steps - done;
    if (done > 0 && left % 500 == 0 && left < 500 * o.average) add_weights();
    const double u = sf::rand({1}, data_gen, {sf::DType::float64}).to_vector<double>()[0];
    return batches[std::min(batches.size() - 1, static_cast<std::size_t>(u * static_cast<double>(batches.size())))];
  });
  if (!o.save.empty() && data.src.subwords) {  // before the checkpoint: a checkpoint is never without them
    data.src.subwords->save(subword_file(o.save, "de"));
    data.tgt.subwords->save(subword_file(o.save, "en"));
  }
  save_if_asked(o, trainer, gen, data_gen);
  const auto greedy = translate_words(model, data, test, 0, 0);
  std::vector<std::vector<std::string>> references;
  for (const auto& p : data.words.test) references.push_back(p.tgt);
  const std::size_t shown = std::min<std::size_t>(8, test.size());
  print_table({data.words.test.begin(), data.words.test.begin() + static_cast<std::ptrdiff_t>(shown)},
              {greedy.begin(), greedy.begin() + static_cast<std::ptrdiff_t>(shown)}, " ");
  // Greedy BLEU, then beam search's, of the weights the model holds; `which` says which weights they are.
  auto score = [&](const std::string& which, const std::vector<std::vector<std::string>>& greedy_words) {
    print_bleu("greedy" + which, test.size(), corpus_bleu(greedy_words, references));
    if (o.beam > 1)
      print_bleu(fmt::format("beam {}, length penalty {}{}", o.beam, o.alpha, which), test.size(),
                 corpus_bleu(translate_words(model, data, test, o.beam, o.alpha), references));
  };
  score("", greedy);
  if (o.average > 0) {  // scored after the final weights, which stay the checkpoint's and the pictures'
    add_weights();
    sf::nn::StateDict final_weights;
    {
      sf::NoGradGuard no_grad;
      for (const auto& [name, t] : model.state_dict()) final_weights[name] = t * 1.0;  // a copy, not a view
      for (auto& [name, t] : weight_sum) t = t * (1.0 / static_cast<double>(averaged));
    }
    model.load_state_dict(weight_sum);
    score(fmt::format(", mean weights of the last {}", averaged), translate_words(model, data, test, 0, 0));
    model.load_state_dict(final_weights);
  }
  if (!o.export_dir.empty()) export_data(o.export_dir, data, greedy);
  if (!test.empty()) write_pictures(o, "freedict", curves, model, test.front(), data.src.vocab, data.tgt.vocab);
  const Collapse c = collapse_of(greedy);
  fmt::print("greedy translations: {:.1f}% empty, {} distinct of {}\n", 100 * c.empty, c.distinct, greedy.size());
  if (c.collapsed()) fmt::print("the model has collapsed: it answers every sentence alike\n");
  return c.collapsed() ? 1 : 0;
}

// --- bleu --------------------------------------------------------------------------------------------
// The demo's scorer for translations made elsewhere (tools/compare/torch_freedict.py): each line read as
// text_tokens reads it, the same corpus BLEU the freedict task prints.
int run_bleu(const Options& o) {
  std::vector<std::vector<std::vector<std::string>>> sides(2);
  for (int k = 0; k < 2; ++k) {
    std::ifstream in(o.bleu_files[k]);
    if (!in) throw std::invalid_argument("bleu: cannot read " + o.bleu_files[k].string());
    for (std::string line; std::getline(in, line);) sides[k].push_back(text_tokens(line));
  }
  if (sides[0].size() != sides[1].size())
    throw std::invalid_argument(fmt::format("bleu: {} has {} lines, {} has {}", o.bleu_files[0].string(),
                                            sides[0].size(), o.bleu_files[1].string(), sides[1].size()));
  print_bleu(o.bleu_files[1].filename().string(), sides[0].size(), corpus_bleu(sides[1], sides[0]));
  return 0;
}

// --- translate ----------------------------------------------------------------------------------------
int run_translate(Options o) {
  if (o.dropout < 0) o.dropout = 0.0;
  if (o.load.empty())
    throw std::invalid_argument("translate needs --load FILE (from: 07_transformer numerals|freedict --save FILE)");
  const bool numerals = o.task == "numerals";
  if (!numerals && o.task != "freedict")
    throw std::invalid_argument("--task must be numerals or freedict, got " + o.task);
  Side src, tgt;  // word-level sides, or the subword models saved beside the checkpoint
  if (numerals) {
    const NumeralVocabularies v = numeral_vocabularies();
    src.vocab = v.src, tgt.vocab = v.tgt;
  } else if (std::filesystem::exists(subword_file(o.load, "de"))) {
    src.subwords = Subwords::load(subword_file(o.load, "de"));
    tgt.subwords = Subwords::load(subword_file(o.load, "en"));
    src.vocab = src.subwords->vocabulary(), tgt.vocab = tgt.subwords->vocabulary();
  } else {
    o.tokens = "words";
    const FreedictData d(o);
    src = d.src, tgt = d.tgt;
  }
  sf::Generator gen(o.common.seed), data_gen(0);
  Transformer model(model_config(o, src.vocab, tgt.vocab), gen, o.tie_output);
  Trainer trainer(model, {});
  trainer.load(o.load, {{"model", &gen}, {"data", &data_gen}});
  model.eval();
  fmt::print("{}, an empty line ends\n",
             numerals ? "type a Chinese numeral (e.g. 三百二十一)" : "type a German phrase (e.g. ein altes Haus)");
  for (std::string line; std::getline(std::cin, line) && !line.empty();) {
    const Pair p{numerals ? char_tokens(line) : src.tokens(text_tokens(line)), {}};
    const Batch b = make_batch({p}, src.vocab, tgt.vocab);
    const auto tokens = tgt.vocab.decode(greedy_decode(model, b.src, {.max_len = max_output_length(b.src.size(1))})[0]);
    fmt::print("{}\n", join(tgt.words(tokens)));
    sf::NoGradGuard no_grad;  // the attention over the model's own tokens (pieces, for a subword model)
    const Batch with_tgt = make_batch({{p.src, tokens}}, src.vocab, tgt.vocab);
    const auto dec = (*model.decoder)(with_tgt.tgt_in, model.encode(with_tgt.src));
    const sf::Tensor w = sf::mean(dec.cross_attention.back(), {1});
    std::vector<std::string> rows{"<bos>"};
    rows.insert(rows.end(), tokens.begin(), tokens.end());
    fmt::print("{}", sf::demo::format_matrix(sf::reshape(w, {w.size(1), w.size(2)}), rows, p.src));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"07_transformer: the whole Transformer, trained on toy pairs, Chinese numerals and German phrases"};
  sf::demo::add_common_options(app, o.common);
  app.add_option("--steps", o.steps, "training steps (default: 150 toy, 5000 numerals, freedict: its recipe)");
  app.add_option("--batch", o.batch, "pairs per batch (numerals)")->capture_default_str();
  app.add_option("--lr-factor", o.lr_factor,
                 "factor of the warmup schedule (default: 0.3 toy, 1 numerals, freedict: its recipe)");
  app.add_option("--warmup", o.warmup,
                 "warmup steps of the schedule (default: 30 toy, 200 numerals, freedict: its recipe)");
  app.add_option("--d-model", o.d_model, "model size (freedict: its recipe)")->capture_default_str();
  app.add_option("--layers", o.layers, "encoder and decoder layers")->capture_default_str();
  app.add_option("--heads", o.heads, "attention heads")->capture_default_str();
  app.add_option("--d-ff", o.d_ff, "feed-forward size")->capture_default_str();
  app.add_option("--dropout", o.dropout, "dropout (default: 0.1 toy, 0 numerals, freedict: its recipe)");
  app.add_option("--threads", o.threads, "CPU threads (default: all cores)");
  app.add_option("--save", o.save, "write a checkpoint at the end (numerals, freedict)");
  app.add_option("--load", o.load, "resume from a checkpoint (numerals, freedict, translate)");
  app.add_option("--dict", o.dict, "the FreeDict German-English dictionary (freedict)")->capture_default_str();
  app.add_option("--task", o.task, "translate: numerals or freedict")->capture_default_str();
  app.add_option("--tokens", o.tokens, "freedict: words, or SentencePiece subwords bpe or unigram")
      ->check(CLI::IsMember({"words", "bpe", "unigram"}))
      ->capture_default_str();
  app.add_option("--vocab", o.vocab, "freedict: subword pieces per language (in all, with --joint-vocab)")
      ->capture_default_str();
  app.add_option("--batch-tokens", o.batch_tokens, "freedict: padded tokens per batch (0: --batch pairs, the recipe's)")
      ->capture_default_str();
  app.add_option("--average", o.average, "freedict: also score the mean weights of the last N, 500 steps apart")
      ->capture_default_str();
  app.add_option("--export", o.export_dir,
                 "freedict: write the splits as tokens, the vocabularies, the test references and our greedy "
                 "translations to DIR (tools/compare/torch_freedict.py reads them)");
  app.add_flag("--joint-vocab", o.joint_vocab, "freedict: one subword vocabulary for German and English");
  app.add_flag("--tie-output", o.tie_output,
               "freedict, translate: the output projection reuses the English embedding's weights");
  app.add_option("--beam", o.beam, "freedict: beam width for the second test BLEU (0: greedy only)")
      ->capture_default_str();
  app.add_option("--alpha", o.alpha, "freedict: beam search length penalty")->capture_default_str();
  app.fallthrough();  // options may follow the sub-command (sub-commands inherit this)
  auto* toy = app.add_subcommand("toy", "seed 000's three pairs, to exact translations");
  auto* numerals = app.add_subcommand("numerals", "Chinese numerals to English words, held-out test");
  auto* freedict = app.add_subcommand("freedict", "German to English phrases from FreeDict, test BLEU");
  auto* translate = app.add_subcommand("translate", "read lines from stdin and translate them (needs --load)");
  auto* bleu = app.add_subcommand("bleu", "corpus BLEU of a file of translations against one of references");
  bleu->add_option("files", o.bleu_files, "REFERENCES TRANSLATIONS: one sentence per line, lower-cased words")
      ->required()
      ->expected(2);
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);
  // freedict's recipe (docs/07_transformer.md, "Real data"), in one place: every option the user did not choose
  // (0 for --steps, --warmup, --lr-factor means the task's default, as for the other tasks). translate --task
  // freedict needs the same model shape to load the checkpoint.
  if (freedict->parsed() || (translate->parsed() && o.task == "freedict")) {
    const FreedictRecipe& r = kFreedictRecipe;
    auto unset = [&](const char* name) { return app.count(name) == 0; };
    if (unset("--d-model")) o.d_model = r.d_model;
    if (unset("--layers")) o.layers = r.layers;
    if (unset("--heads")) o.heads = r.heads;
    if (unset("--d-ff")) o.d_ff = r.d_ff;
  }
  if (freedict->parsed()) {  // and how to train it
    const FreedictRecipe& r = kFreedictRecipe;
    if (app.count("--batch-tokens") == 0) o.batch_tokens = r.batch_tokens;
    if (o.dropout < 0) o.dropout = r.dropout;
    if (o.steps <= 0) o.steps = r.steps;
    if (o.warmup <= 0) o.warmup = r.warmup;
    if (o.lr_factor <= 0) o.lr_factor = r.lr_factor;
  }
  try {
    if (o.threads > 0) omp_set_num_threads(o.threads);
    if (toy->parsed()) return run_toy(o);
    if (numerals->parsed()) return run_numerals(o);
    if (freedict->parsed()) return run_freedict(o);
    if (translate->parsed()) return run_translate(o);
    if (bleu->parsed()) return run_bleu(o);
    const int rc = run_toy(o);
    fmt::print("\n");
    return rc | run_numerals(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "07_transformer: {}\n", e.what());
    return 1;
  }
}
