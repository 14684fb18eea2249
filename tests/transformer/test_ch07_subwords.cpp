// Chapter 07: subword units from SentencePiece (transformer/subwords.h). The corpus is made up here: compound
// nouns built from a few stems, so byte-pair merges have something to find.
#include <filesystem>
#include <fstream>
#include <set>

#include <unistd.h>

#include "../helpers.h"
#include "nn/errors.h"
#include "transformer/subwords.h"

using namespace stepformer;
using namespace stepformer::transformer;

namespace {

std::vector<std::string> compound_corpus() {
  const std::vector<std::string> stems{"haus", "tür", "schlüssel", "garten", "auto", "bahn", "hof", "zug"};
  std::vector<std::string> texts;
  for (const auto& a : stems)
    for (const auto& b : stems)
      if (a != b) texts.push_back("das " + a + b + " ist alt , der " + b + " auch .");
  return texts;
}

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("stepformer_subwords_" + std::to_string(::getpid()) + "_" + name);
}

}  // namespace

TEST_CASE("subwords: decode(encode(text)) is the text; a new compound is spelled in known pieces", "[ch07][subwords]") {
  for (const std::string type : {"bpe", "unigram"}) {
    CAPTURE(type);
    const Subwords sw = Subwords::train(compound_corpus(), {.model_type = type, .vocab_size = 60});
    const Vocabulary v = sw.vocabulary();
    for (const std::string text : {"das haustür ist alt , der tür auch .", "der zugschlüssel"}) {
      const auto pieces = sw.encode(text);
      CHECK(sw.decode(pieces) == text);
      for (const auto& p : pieces) CHECK(v.id(p) != Vocabulary::kUnk);  // every piece is a vocabulary entry
    }
    // A three-stem compound is in no sentence of the corpus: it is split into pieces, not unknown.
    const auto pieces = sw.encode("gartenbahnhofzug");
    CHECK(pieces.size() > 1);
    CHECK(sw.decode(pieces) == "gartenbahnhofzug");
  }
}

TEST_CASE("subwords: the vocabulary is the specials, then each piece once", "[ch07][subwords]") {
  const Subwords sw = Subwords::train(compound_corpus(), {.vocab_size = 60});
  const Vocabulary v = sw.vocabulary();
  CHECK(v.token(Vocabulary::kPad) == "<pad>");
  CHECK(v.token(Vocabulary::kUnk) == "<unk>");
  CHECK(v.size() == 60 - 1 + 4);  // SentencePiece's own <unk> is ours
  std::set<std::string> seen;
  for (std::int64_t id = 4; id < v.size(); ++id) {
    CHECK(seen.insert(v.token(id)).second);
    CHECK(v.id(v.token(id)) == id);
  }
}

TEST_CASE("subwords: training is deterministic; save and load give the same pieces", "[ch07][subwords]") {
  const Subwords a = Subwords::train(compound_corpus(), {.vocab_size = 60});
  const Subwords b = Subwords::train(compound_corpus(), {.vocab_size = 60});
  CHECK(a.bytes() == b.bytes());
  const auto path = temp_path("model.spm");
  a.save(path);
  const Subwords c = Subwords::load(path);
  CHECK(c.bytes() == a.bytes());
  CHECK(c.encode("der hofgarten ist alt") == a.encode("der hofgarten ist alt"));
  std::filesystem::remove(path);
}

TEST_CASE("subwords: a text it was not trained on shapes no piece", "[ch07][subwords]") {
  auto corpus = compound_corpus();
  const Subwords without = Subwords::train(corpus, {.vocab_size = 60});
  // "q" occurs nowhere in the corpus: SentencePiece passes it through as it is, and it is no vocabulary entry.
  CHECK(without.encode("q") == std::vector<std::string>{"▁", "q"});
  CHECK(without.vocabulary().id("q") == Vocabulary::kUnk);
  for (int i = 0; i < 20; ++i) corpus.push_back("quark quark quark");
  const Subwords with = Subwords::train(corpus, {.vocab_size = 60});
  CHECK(with.encode("quark") != without.encode("quark"));
}

TEST_CASE("subwords: bad options, too little text and corrupt files are typed errors", "[ch07][subwords]") {
  REQUIRE_THROWS_WITH_ALL(Subwords::train(compound_corpus(), {.model_type = "wordpiece"}), SubwordError, "wordpiece");
  CHECK_THROWS_AS(Subwords::train({}, {}), SubwordError);
  CHECK_THROWS_AS(Subwords::from_bytes("not a model"), SubwordError);
  const auto path = temp_path("corrupt.spm");
  std::ofstream(path) << "garbage";
  REQUIRE_THROWS_WITH_ALL(Subwords::load(path), SubwordError, path.c_str());
  std::filesystem::remove(path);
  CHECK_THROWS_AS(Subwords::load(temp_path("missing.spm")), nn::IoError);
}
