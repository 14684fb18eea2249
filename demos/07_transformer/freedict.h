#pragma once
// The freedict task of the 07 demo: German -> English phrases from Debian's dict-freedict-deu-eng, as words
// or SentencePiece subwords, trained by the recipe (options.h), scored by corpus BLEU (greedy, beam search,
// averaged checkpoints), with a collapse gate and an export for tools/compare/torch_freedict.py.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "options.h"
#include "transformer/bleu.h"
#include "transformer/subwords.h"

namespace ch07 {

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
inline std::filesystem::path subword_file(const std::filesystem::path& checkpoint, const char* language) {
  return checkpoint.string() + "." + language + ".spm";
}

struct FreedictData {
  Splits words;   // lower-cased word tokens: what BLEU scores and the samples show
  Splits tokens;  // the same pairs as the model reads and writes them
  Side src, tgt;
  static constexpr std::size_t kMaxWords = 12;

  explicit FreedictData(const Options& o);  // reads --dict, splits it, learns the subwords
};

int run_freedict(Options o);
// The demo's scorer for translations made elsewhere (tools/compare/torch_freedict.py): each line read as
// text_tokens reads it, the same corpus BLEU the freedict task prints.
int run_bleu(const Options& o);

}  // namespace ch07
