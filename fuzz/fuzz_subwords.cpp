// libFuzzer target: subword units (transformer/subwords.h) on arbitrary input. The first byte chooses:
// even, the rest is text to split into the pieces of a model learned here from a made-up corpus (pieces are
// never empty, their ids in range; when every piece is known, the decoded text encodes into the same pieces); odd, the
// rest is a model file as `translate --load` would read it beside a checkpoint (a model, or SubwordError; never a
// crash).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "transformer/subwords.h"

namespace {
using stepformer::transformer::Subwords;

const Subwords& model() {
  static const Subwords m = [] {
    std::vector<std::string> corpus;
    for (const char* a : {"haus", "tür", "straße", "garten", "zug", "bahn"})
      for (const char* b : {"schlüssel", "hof", "platz", "tor"})
        corpus.push_back(std::string("das ") + a + b + " ist groß , oder ? ja !");
    return Subwords::train(corpus, {.vocab_size = 80});
  }();
  return m;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    const auto pieces = model().encode(rest);
    for (const auto& p : pieces)
      if (p.empty()) std::abort();
    const auto vocab = model().vocabulary();
    const auto ids = vocab.encode(pieces);
    bool known = true;  // SentencePiece decodes an unknown piece lossily (by design): only known text round-trips
    for (const auto id : ids) {
      if (id < 0 || id >= vocab.size()) std::abort();
      known = known && id != stepformer::transformer::Vocabulary::kUnk;
    }
    const std::string text = model().decode(pieces);
    if (known && model().encode(text) != pieces) {
      std::fprintf(stderr, "'%s' decoded from its pieces encodes into other pieces\n", text.c_str());
      std::abort();
    }
  } else {
    try {
      const Subwords m = Subwords::from_bytes(rest);
      (void)m.decode(m.encode("das haus"));
      (void)m.vocabulary();
    } catch (const stepformer::transformer::SubwordError&) {
    }
  }
  return 0;
}
