#pragma once
// Chapter 12 — a language model's data: the King James Bible from Debian's bible-kjv package (public domain),
// whole books held out, subword token streams, windows of T + 1 tokens, and bits per byte.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/random.h"
#include "transformer/language_model.h"
#include "transformer/subwords.h"

namespace stepformer::transformer {

struct Verse {
  std::string book;  // the code `bible` prints: "Ge", "Ruth", "Jonah", "Acts", "Rev", ...
  std::string text;
};

// Lines "Ge1:1 In the beginning ..." -> verses; ValueError naming the line when one has no "Book1:1" reference.
std::vector<Verse> parse_verses(const std::string& text);
// All 31,102 verses: runs `bible -f Gen1:1-Rev22:21` (bible-kjv, read at run time, never stored in the
// repository), or reads a file of that command's output (a machine without the package). IoError saying what to
// install when the command is missing or fails, or naming the file. part: the file may hold any verses, at least
// one (the book's page ships a few chapters: there is no `bible` in a browser).
std::vector<Verse> read_kjv(const std::string& file = "", bool part = false);

// The held-out books: Ruth, Jonah and Acts — narrative prose from both testaments, 5% of the verses, books whose
// text the training books do not repeat (Mark, say, would leak through Matthew and Luke).
const std::vector<std::string>& kjv_valid_books();
struct TextSplit {
  std::vector<std::string> train, valid;  // verse texts
};
TextSplit split_by_books(const std::vector<Verse>& verses, const std::vector<std::string>& valid_books);

// How chapter 12's text becomes pieces and back: SentencePiece's BPE pieces (Subwords), or its UTF-8 characters,
// spaces included (no library: the WebAssembly build for the book's page has no SentencePiece; nanoGPT's
// shakespeare_char trains on characters too).
class LMTokens {
 public:
  static LMTokens bpe(Subwords subwords);
  static LMTokens characters();
  std::vector<std::string> pieces(std::string_view text) const;
  std::string text(const std::vector<std::string>& pieces) const;
  // The pieces a model predicts: the BPE model's, or every character of `texts` in the order they first appear.
  Vocabulary vocabulary(const std::vector<std::string>& texts) const;

 private:
  std::optional<Subwords> bpe_;
};

// Each verse's pieces' ids followed by EOS, one stream. `bytes` counts each verse's UTF-8 bytes plus one for the
// newline that ends it: the text the stream encodes, the denominator of bits per byte.
struct TokenStream {
  std::vector<std::int64_t> ids;
  std::int64_t bytes = 0;
};
TokenStream encode_stream(const LMTokens& tokens, const Vocabulary& vocab, const std::vector<std::string>& texts);

// inputs = window[0 .. T-1], targets = window[1 .. T]: int64 [B, T] each.
struct LMBatch {
  Tensor inputs, targets;
};
// B windows of T + 1 tokens at random starts (uniform, drawn from gen).
LMBatch random_windows(const TokenStream& s, std::int64_t B, std::int64_t T, Generator& gen);
// Windows of T + 1 tokens every T tokens from the start (each token predicted once), at most max_windows, in
// batches of B.
std::vector<LMBatch> sequential_windows(const TokenStream& s, std::int64_t B, std::int64_t T, std::int64_t max_windows);

// Mean cross-entropy (nats per target token) over the batches, in eval mode, without a graph.
double lm_loss(LanguageModel& model, const std::vector<LMBatch>& batches);
// Bits per byte of text: (nats per token x tokens) / (ln 2 x bytes). Unlike the loss per token, it does not
// depend on the tokenizer, so runs with different vocabularies (or PyTorch's) compare.
double bits_per_byte(double nats_per_token, std::int64_t tokens, std::int64_t bytes);

}  // namespace stepformer::transformer
