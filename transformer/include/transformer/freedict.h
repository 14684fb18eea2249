#pragma once
// Chapter 07 — real data: German -> English example phrases and sentences from the FreeDict dictionary.
//
// Debian's dict-freedict-deu-eng installs the Ding/FreeDict German-English dictionary in dictd format:
// a gzip-compatible `.dict.dz` (dictzip) of plain-text entries and an `.index` for random access, which we
// do not need because we read every entry. Many entries carry usage examples, one per line:
//
//       "Ich kann nicht an zwei Orten gleichzeitig sein."  - I can't be in two places at once.
//
// Those lines are our parallel corpus (about 35,000 distinct pairs). The dictionary is GPL/AGPL, so the
// project never commits any of its text: the demo reads it from the installed package at run time.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "transformer/data.h"

namespace stepformer::transformer {

inline const std::filesystem::path kFreedictDeuEng = "/usr/share/dictd/freedict-deu-eng.dict.dz";

// The whole decompressed file (gzip or dictzip). IoError when it is missing or not valid gzip.
std::string read_gzip_file(const std::filesystem::path& path);

struct TextPair {
  std::string src, tgt;
};

// Every example line `      "<German>"  - <English>` of the dictionary text, in file order, duplicates
// removed (the same example is listed under each of its headwords). Where the English lists
// alternatives ("Residents only!, Access only!") and the German has no comma, only the first is kept.
std::vector<TextPair> freedict_examples(std::string_view dict_text);

// Lower-cased words and punctuation marks: "Ich kann's nicht." -> {"ich", "kann's", "nicht", "."}.
// Letters are ASCII and anything non-ASCII (UTF-8 umlauts, ß); Latin-1 capitals (Ä, Ö, Ü) are lowered too.
std::vector<std::string> text_tokens(std::string_view text);

// A fixed split: a pair goes to test, valid or train by a hash (FNV-1a) of its German tokens, so the
// split never changes with the order of the file or the random seed, and a German phrase is never in
// two splits. Pairs longer than `max_tokens` on either side are dropped.
struct Splits {
  std::vector<Pair> train, valid, test;
};
Splits split_pairs(const std::vector<TextPair>& pairs, std::size_t max_tokens, double valid_fraction = 0.05,
                   double test_fraction = 0.05);

}  // namespace stepformer::transformer
