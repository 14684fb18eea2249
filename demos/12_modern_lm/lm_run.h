#pragma once
// Chapter 12's demo: one training run of a language model on the King James Bible, and what it reports.
#include <string>
#include <vector>

#include "demo.h"
#include "transformer/lm_train.h"
#include "transformer/sampling.h"

namespace ch12 {
namespace sf = stepformer;
using namespace stepformer::transformer;

struct Options {
  sf::demo::CommonOptions common;
  std::string block = "llama";  // lm_config_names()
  std::int64_t steps = 600, batch = 16, seq_len = 128, d_model = 256, layers = 4, heads = 8, vocab = 2000;
  double lr = 2e-3;
  std::string precision = "fp32";
  std::int64_t valid_every = 100, valid_windows = 400;
  std::string prompt = "And God said";
  std::int64_t sample_tokens = 48, timed_tokens = 256;
  SamplingOptions sampling{0.8, 0, 0.9};
  bool ablation = false;
  std::vector<std::string> blocks;  // the ablation's blocks; empty: all (lm_config_names()); "none": gather only
  std::string kjv_file;             // the output of `bible -f Gen1:1-Rev22:21`, where the package is missing
  bool kjv_part = false;            // the file holds some verses only (the book's page)
  std::string tokens = "bpe";       // or "chars" (LMTokens)
  std::int64_t seeds = 2;
};

// The data a run trains and validates on: subwords learned from the training books only, or their characters.
struct Corpus {
  LMTokens tokens;
  Vocabulary vocab;
  TokenStream train, valid;
};
Corpus load_corpus(const Options& o);

LMConfig config_for(const Options& o, const std::string& block, std::int64_t vocab);

// The losses of a run: training loss every step, validation loss (nats per token) and bits per byte at steps
// `valid_steps`; its wall time.
struct Run {
  std::string block;
  std::uint64_t seed = 0;
  std::int64_t parameters = 0;
  std::vector<double> train, valid, valid_bpb, valid_steps;
  double seconds = 0, tokens_per_s = 0;
};
Run train_run(const Options& o, const Corpus& c, LanguageModel& model, std::uint64_t seed, bool print);

// Samples from the prompt, then times a timed_tokens-token sample with and without the KV cache.
void sample_and_time(const Options& o, const Corpus& c, LanguageModel& model);

// The blocks of --blocks (default: every named block), `seeds` seeds each, same steps and data, each run's
// validation curve written to 12_ablation_<block>_seed<S>.csv in --out; then every such file found there (runs
// made by other processes too, e.g. one per block side by side) gathered into a table (12_ablation.md) and the
// first seed's curves overlaid (12_ablation.svg).
void ablation(const Options& o, const Corpus* c);

// The options that say which model and data a run has, shared by 12_modern_lm and the lm_fixture tool (so a
// fixture is of the very model a run of the same options trains): --block, --batch, --seq-len, --d-model,
// --layers, --heads, --vocab, --lr, --valid-windows, --kjv-file. check_model_options after parsing.
void add_model_options(CLI::App& app, Options& o);
void check_model_options(const Options& o);  // ValueError: --d-model must split into --heads of an even size

}  // namespace ch12
