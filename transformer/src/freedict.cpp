// Chapter 07: the FreeDict German-English reader.
#include "transformer/freedict.h"

#include <fmt/format.h>

#include <cctype>
#include <unordered_set>

#include "nn/errors.h"

namespace stepformer::transformer {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// `      "<German>"  - <English>`: six spaces, a quoted German text, two spaces, "- ", the English.
bool parse_example(std::string_view line, TextPair& out) {
  constexpr std::string_view kIndent = "      \"", kSeparator = "\"  - ";
  if (!line.starts_with(kIndent)) return false;
  line.remove_prefix(kIndent.size());
  const auto sep = line.rfind(kSeparator);
  if (sep == std::string_view::npos) return false;
  const std::string_view de = trim(line.substr(0, sep));
  std::string_view en = trim(line.substr(sep + kSeparator.size()));
  if (de.find(',') == std::string_view::npos) en = trim(en.substr(0, en.find(", ")));
  if (de.empty() || en.empty()) return false;
  out = {std::string(de), std::string(en)};
  return true;
}

}  // namespace

std::vector<TextPair> freedict_examples(std::string_view text) {
  std::vector<TextPair> pairs;
  std::unordered_set<std::string> seen;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    TextPair p;
    if (parse_example(line, p) && seen.insert(p.src + '\t' + p.tgt).second) pairs.push_back(std::move(p));
  }
  return pairs;
}

std::vector<std::string> text_tokens(std::string_view text) {
  std::vector<std::string> out;
  std::string word;
  const auto flush = [&] {
    if (!word.empty()) out.push_back(std::move(word)), word.clear();
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {  // part of a UTF-8 letter; U+00C0..U+00DE (but not U+00D7 '×') lower by adding 0x20
      const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
      if (c == 0xC3 && next >= 0x80 && next <= 0x9E && next != 0x97) {
        word += static_cast<char>(c), word += static_cast<char>(next + 0x20), ++i;
      } else {
        word += static_cast<char>(c);
      }
    } else if (std::isalnum(c) || ((c == '\'' || c == '-') && !word.empty())) {
      word += static_cast<char>(std::tolower(c));
    } else {
      flush();
      if (!std::isspace(c) && std::isprint(c)) out.emplace_back(1, static_cast<char>(c));
    }
  }
  flush();
  return out;
}

Splits split_pairs(const std::vector<TextPair>& pairs, std::size_t max_tokens, double valid_fraction,
                   double test_fraction) {
  Splits s;
  std::unordered_set<std::string> sources;
  for (const auto& p : pairs) {
    Pair tokens{text_tokens(p.src), text_tokens(p.tgt)};
    if (tokens.src.empty() || tokens.tgt.empty() || tokens.src.size() > max_tokens || tokens.tgt.size() > max_tokens)
      continue;
    const std::string key = join(tokens.src);
    if (!sources.insert(key).second) continue;  // one translation per German text: the first listed
    std::uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bit
    for (const char c : key) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    const double u = static_cast<double>(h % 1'000'000) / 1e6;
    auto& split = u < test_fraction ? s.test : u < test_fraction + valid_fraction ? s.valid : s.train;
    split.push_back(std::move(tokens));
  }
  return s;
}

}  // namespace stepformer::transformer
