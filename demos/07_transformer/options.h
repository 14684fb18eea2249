#pragma once
// The 07 demo's command line (main.cpp parses it), the freedict recipe, and the model those options make.
#include <filesystem>
#include <string>
#include <vector>

#include "demo.h"
#include "transformer/freedict.h"
#include "transformer/model.h"

namespace ch07 {

namespace sf = stepformer;
using namespace stepformer::transformer;

struct Options {
  sf::demo::CommonOptions common;
  std::int64_t steps = 0;  // 0: the task's default
  double floor = 0;        // numerals: exit 1 when the exact match (%) ends below it
  std::int64_t batch = 64;
  double lr_factor = 0;     // 0: the task's default
  std::int64_t warmup = 0;  // 0: the task's default
  std::int64_t d_model = 64, layers = 2, heads = 4, d_ff = 256;
  double dropout = -1;             // < 0: the task's default (toy 0.1; numerals 0, its data is unlimited)
  int threads = 0;                 // 0: OpenMP's default
  std::string precision = "fp32";  // fp32, or bf16: forward and loss under autocast (chapter 11)
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

inline Config model_config(const Options& o, const Vocabulary& sv, const Vocabulary& tv) {
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

// The recipe `./run demo freedict` trains (docs/07_transformer.md, "Real data": the measurements behind it).
struct FreedictRecipe {
  std::int64_t d_model, layers, heads, d_ff, batch_tokens, warmup, steps;
  double lr_factor, dropout;
};
inline constexpr FreedictRecipe kFreedictRecipe{.d_model = 128,
                                                .layers = 2,
                                                .heads = 4,
                                                .d_ff = 512,
                                                .batch_tokens = 0,
                                                .warmup = 1000,
                                                .steps = 6000,
                                                .lr_factor = 0.5,
                                                .dropout = 0.1};

}  // namespace ch07
