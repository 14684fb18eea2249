#pragma once
// Chapter 07 — data: vocabularies, tokenizers, batches, and the data sets the demo trains on.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/random.h"
#include "autograd/tensor.h"

namespace stepformer::transformer {

// Token <-> id. Ids are dense and unique, 0 .. size()-1, with the four specials first (seed 000, docs/seeds.md, listed
// '.' twice, so one id was never produced and another equalled the vocabulary size).
class Vocabulary {
 public:
  static constexpr std::int64_t kPad = 0, kBos = 1, kEos = 2, kUnk = 3;

  Vocabulary();  // just the specials: <pad> <bos> <eos> <unk>
  // Every distinct token of the corpus seen at least `min_count` times, in order of first appearance;
  // rarer tokens will encode as <unk>.
  static Vocabulary build(const std::vector<std::vector<std::string>>& corpus, std::int64_t min_count = 1);

  // Text never produces a special: the word "<eos>" in a sentence is unknown, not the end of the sentence
  // (found by fuzz/fuzz_tokens.cpp). So add() and id() map the specials' names to kUnk.
  std::int64_t add(const std::string& token);       // its id (the existing one if already present)
  std::int64_t id(const std::string& token) const;  // kUnk when absent
  const std::string& token(std::int64_t id) const;  // IndexError when out of range
  std::int64_t size() const { return static_cast<std::int64_t>(tokens_.size()); }

  std::vector<std::int64_t> encode(const std::vector<std::string>& tokens) const;
  // Stops at the first EOS; skips PAD and BOS.
  std::vector<std::string> decode(const std::vector<std::int64_t>& ids) const;

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, std::int64_t> ids_;
};

std::vector<std::string> word_tokens(const std::string& text);  // split on whitespace
// One token per UTF-8 character; spaces dropped (the numerals' Chinese side), or kept (chapter 12's characters).
std::vector<std::string> char_tokens(const std::string& text, bool keep_spaces = false);
std::string join(const std::vector<std::string>& tokens, const std::string& sep = " ");

struct Pair {
  std::vector<std::string> src, tgt;
};

// A padded batch: tgt_in = BOS + target ("shifted right"), tgt_out = target + EOS.
struct Batch {
  Tensor src;                      // int64 [B, S]
  Tensor tgt_in;                   // int64 [B, T]
  Tensor tgt_out;                  // int64 [B, T]
  std::int64_t target_tokens = 0;  // non-PAD entries of tgt_out
};
Batch make_batch(const std::vector<Pair>& pairs, const Vocabulary& src_vocab, const Vocabulary& tgt_vocab);
// Sorts by length (less padding), cuts into batches of at most `batch_size` pairs.
std::vector<Batch> make_batches(std::vector<Pair> pairs, const Vocabulary& src_vocab, const Vocabulary& tgt_vocab,
                                std::int64_t batch_size);

// Batches by tokens, as the paper does (5.1: "each training batch contained ... approximately 25000 source
// tokens and 25000 target tokens"): sorted by length, each batch as many pairs as fit in `max_tokens` padded
// positions of its longer side (source, or target + BOS); a pair longer than that is a batch of its own.
std::vector<Batch> make_token_batches(std::vector<Pair> pairs, const Vocabulary& src_vocab, const Vocabulary& tgt_vocab,
                                      std::int64_t max_tokens);

// --- data sets -----------------------------------------------------------------------------------
// Seed 000's three zh -> en pairs (docs/seeds.md) ("我 有 一 个 好 朋 友" -> "I have a good friend .").
std::vector<Pair> toy_pairs();

// Chinese numerals to English words, 1 to 99,999: 一万零三 -> "ten thousand and three", 三百二十一 ->
// "three hundred twenty one". The source is read character by character; the translation needs real
// reordering (万 groups four digits, English groups three) and the 零 rules.
std::string chinese_numeral(std::int64_t n);
std::string english_number(std::int64_t n);
Pair numeral_pair(std::int64_t n);

// Every character and word a numeral pair can contain (the source's characters, the target's words).
struct NumeralVocabularies {
  Vocabulary src, tgt;
};
NumeralVocabularies numeral_vocabularies();

// Numbers split once into train and held-out test by a hash of the number and the seed (about 10% test):
// test numbers are never seen in training.
class NumeralTask {
 public:
  explicit NumeralTask(std::uint64_t seed = 0, double test_fraction = 0.1);
  bool is_test(std::int64_t n) const;
  std::vector<Pair> train_batch(std::int64_t size, Generator& gen) const;  // random training numbers
  std::vector<Pair> test_set(std::int64_t size) const;                     // the first `size` test numbers
  static constexpr std::int64_t kMax = 99'999;

 private:
  std::uint64_t seed_;
  double test_fraction_;
};

}  // namespace stepformer::transformer
