// Chapter 07: the FreeDict reader, the fixed split and corpus BLEU. The dictionary text here is written
// for the test in the package's format; no line of the real (GPL) dictionary is used.
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "../helpers.h"
#include "nn/errors.h"
#include "transformer/bleu.h"
#include "transformer/freedict.h"

using namespace stepformer;
using namespace stepformer::test;
using namespace stepformer::transformer;

namespace {
using Words = std::vector<std::string>;

const char* const kDictText =
    "00-database-info\n"
    "A made-up dictionary in dictd's plain-text form\n"
    "\n"
    "Haus /haʊs/ <neut, n, sg>\n"
    "house <n>\n"
    "      \"ein altes Haus\"  - an old house\n"
    "      \"Das Haus ist groß.\"  - The house is big.\n"
    " see: {Häuser}\n"
    "\n"
    "Gebäude /gəˈbɔʏdə/ <neut, n, sg>\n"
    "building <n>\n"
    "      \"ein altes Haus\"  - an old house\n"  // the same example under a second headword
    "      \"Zutritt verboten!\"  - No entry!, No admittance!\n"
    "      \"Ja, das Haus\"  - Yes, the house\n"
    "      \"kein Trennzeichen\" - one space only\n"
    "      \"unterbrochen\n"
    "      \"\"  - empty German\n";

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("stepformer-test-" + name);
}

void write_gzip(const std::filesystem::path& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, text.data(), static_cast<unsigned>(text.size())) == static_cast<int>(text.size()));
  REQUIRE(gzclose(f) == Z_OK);
}
}  // namespace

TEST_CASE("freedict: example lines become pairs, once each, first English alternative", "[ch07][data]") {
  const auto pairs = freedict_examples(kDictText);
  REQUIRE(pairs.size() == 4);
  CHECK(pairs[0].src == "ein altes Haus");
  CHECK(pairs[0].tgt == "an old house");
  CHECK(pairs[1].tgt == "The house is big.");
  CHECK(pairs[2].tgt == "No entry!");       // alternatives: the first
  CHECK(pairs[3].tgt == "Yes, the house");  // the German has a comma: the English is kept whole
  CHECK(freedict_examples("").empty());
  CHECK(freedict_examples("      \"").empty());  // truncated lines are skipped, never read past
}

TEST_CASE("freedict: the gzip reader round-trips and names the file it cannot read", "[ch07][data]") {
  const auto path = temp_file("dict.dz");
  write_gzip(path, kDictText);
  CHECK(read_gzip_file(path) == kDictText);

  std::string compressed;
  {
    std::ifstream in(path, std::ios::binary);
    compressed.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto truncated = temp_file("truncated.dz");
  std::ofstream(truncated, std::ios::binary) << compressed.substr(0, compressed.size() / 2);
  REQUIRE_THROWS_WITH_ALL(read_gzip_file(truncated), nn::IoError, "truncated.dz", "not valid gzip");
  REQUIRE_THROWS_WITH_ALL(read_gzip_file(temp_file("absent.dz")), nn::IoError, "absent.dz", "does not exist");
  std::filesystem::remove(path);
  std::filesystem::remove(truncated);
}

TEST_CASE("text tokens: lower case, punctuation apart, umlauts kept", "[ch07][data]") {
  CHECK(text_tokens("Ich kann's nicht.") == Words{"ich", "kann's", "nicht", "."});
  CHECK(text_tokens("ÜBER Äpfel, Öl und Straße") == Words{"über", "äpfel", ",", "öl", "und", "straße"});
  CHECK(text_tokens("jdn./etw. A-Horizont 3×4") == Words{"jdn", ".", "/", "etw", ".", "a-horizont", "3×4"});
  CHECK(text_tokens("- 'quoted' -") == Words{"-", "'", "quoted'", "-"});
  CHECK(text_tokens("  \t").empty());
}

TEST_CASE("the split is fixed by the German text: disjoint, order-independent, about 5/5/90", "[ch07][data]") {
  std::vector<TextPair> pairs;
  for (int i = 0; i < 4000; ++i) pairs.push_back({"satz nummer " + std::to_string(i), "sentence " + std::to_string(i)});
  pairs.push_back({"satz nummer 7", "a second translation"});  // a German text already seen: dropped
  pairs.push_back({"zu lang " + std::string(40, 'a') + " b c d e f g h", "too long"});
  const Splits s = split_pairs(pairs, 6);
  CHECK(s.train.size() + s.valid.size() + s.test.size() == 4000);
  CHECK(std::abs(static_cast<double>(s.test.size()) / 4000 - 0.05) < 0.015);
  CHECK(std::abs(static_cast<double>(s.valid.size()) / 4000 - 0.05) < 0.015);

  std::set<std::string> test_sources;
  for (const auto& p : s.test) test_sources.insert(join(p.src));
  for (const auto& p : s.train) CHECK(test_sources.count(join(p.src)) == 0);
  for (const auto& p : s.valid) CHECK(test_sources.count(join(p.src)) == 0);

  std::vector<TextPair> reversed(pairs.rbegin() + 2, pairs.rend());
  std::set<std::string> again;
  for (const auto& p : split_pairs(reversed, 6).test) again.insert(join(p.src));
  CHECK(again == test_sources);
}

TEST_CASE("vocabulary min_count: rare tokens encode as UNK", "[ch07][data]") {
  const Vocabulary v = Vocabulary::build({Words{"a", "b", "a"}, Words{"c", "a", "b"}}, 2);
  CHECK(v.size() == 4 + 2);
  CHECK(v.id("c") == Vocabulary::kUnk);
  CHECK(v.id("a") == 4);
}

TEST_CASE("corpus BLEU: hand-computed values, clipping, brevity, corpus-level sums", "[ch07][bleu]") {
  const Words ref = text_tokens("the cat sat on the red mat"), hyp = text_tokens("the cat sat on the mat");
  // 1-grams 6/6, 2-grams 4/5, 3-grams 3/4, 4-grams 2/3; c = 6 < r = 7: BP = exp(1 - 7/6).
  const BleuScore s = corpus_bleu({hyp}, {ref});
  CHECK(s.precisions == std::array<double, 4>{1.0, 0.8, 0.75, 2.0 / 3});
  CHECK(s.brevity_penalty == Catch::Approx(std::exp(-1.0 / 6)));
  CHECK(s.bleu == Catch::Approx(100 * std::exp(-1.0 / 6) * std::pow(1.0 * 0.8 * 0.75 * 2 / 3, 0.25)));
  CHECK(corpus_bleu({ref}, {ref}).bleu == Catch::Approx(100));

  // "the" counts at most as often as the reference has it (Papineni's modified precision).
  CHECK(corpus_bleu({Words{"the", "the", "the", "the"}}, {Words{"the", "cat"}}).precisions[0] == 0.25);
  CHECK(corpus_bleu({Words{}}, {ref}).bleu == 0);
  CHECK(corpus_bleu({hyp}, {text_tokens("a dog ran")}).bleu == 0);  // no 4-gram matches: 0, unsmoothed

  // Corpus level: counts are summed first. The second sentence alone scores 0 (no 4-grams), yet it adds
  // its 1- and 2-gram matches and its length to the corpus totals.
  const BleuScore both = corpus_bleu({hyp, Words{"a", "dog"}}, {ref, Words{"a", "dog"}});
  CHECK(both.precisions[0] == 1.0);
  CHECK(both.precisions[1] == Catch::Approx(5.0 / 6));
  CHECK(both.hypothesis_length == 8);
  REQUIRE_THROWS_WITH_ALL(corpus_bleu({hyp}, {}), ValueError, "corpus_bleu", "1 hypotheses but 0 references");
}
