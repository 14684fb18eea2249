// libFuzzer target: the tokenizers and the vocabulary on arbitrary bytes (any UTF-8, or none). Tokens
// are never empty and never hold whitespace; a vocabulary built from them encodes and decodes them back.
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "transformer/data.h"
#include "transformer/freedict.h"

namespace {
void check_tokens(const std::vector<std::string>& tokens) {
  for (const auto& t : tokens) {
    if (t.empty()) std::abort();
    for (const char c : t)
      if (c == ' ' || c == '\n' || c == '\t') std::abort();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stepformer::transformer;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto words = word_tokens(text), chars = char_tokens(text), lowered = text_tokens(text);
  check_tokens(words);
  check_tokens(lowered);
  for (const auto& c : chars)
    if (c.empty() || c.size() > 4) std::abort();
  const Vocabulary specials;
  for (const auto* tokens : {&words, &chars, &lowered}) {
    const Vocabulary v = Vocabulary::build({*tokens});
    const auto ids = v.encode(*tokens);
    if (ids.size() != tokens->size()) std::abort();
    for (std::size_t i = 0; i < ids.size(); ++i) {
      // Every token is known, except the specials' own names, which are unknown words (never controls).
      const bool special_name =
          specials.id((*tokens)[i]) == Vocabulary::kUnk &&
          ((*tokens)[i] == "<pad>" || (*tokens)[i] == "<bos>" || (*tokens)[i] == "<eos>" || (*tokens)[i] == "<unk>");
      if (special_name ? ids[i] != Vocabulary::kUnk : (ids[i] <= Vocabulary::kUnk || ids[i] >= v.size())) std::abort();
      if (!special_name && v.token(ids[i]) != (*tokens)[i]) std::abort();
    }
    if (v.decode(ids).size() != tokens->size()) std::abort();  // decoding stops at nothing the text wrote
  }
  return 0;
}
