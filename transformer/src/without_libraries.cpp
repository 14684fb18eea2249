// The WebAssembly build (cmake/wasm.cmake) has no zlib and no SentencePiece: Debian builds them for the host
// only. What needs them says so with the error the native build gives for a missing file or a bad model,
// instead of failing to link; everything else (word-level vocabularies, the toy and numerals tasks) is there.
#include <fmt/format.h>

#include "nn/errors.h"
#include "transformer/freedict.h"
#include "transformer/subwords.h"

namespace stepformer::transformer {
namespace {

[[noreturn]] void no_sentencepiece(const char* what) {
  throw SubwordError(fmt::format("subwords: {} needs SentencePiece, which the WebAssembly build does not have", what));
}

}  // namespace

std::string read_gzip_file(const std::filesystem::path& path) {
  throw nn::IoError(fmt::format(
      "read_gzip_file: {}: reading gzip needs zlib, which the WebAssembly build does not have", path.string()));
}

Subwords Subwords::train(const std::vector<std::string>&, const SubwordOptions&) { no_sentencepiece("training"); }
Subwords Subwords::from_bytes(std::string) { no_sentencepiece("loading a model"); }
Subwords Subwords::load(const std::filesystem::path&) { no_sentencepiece("loading a model"); }
void Subwords::save(const std::filesystem::path&) const { no_sentencepiece("saving a model"); }
std::vector<std::string> Subwords::encode(std::string_view) const { no_sentencepiece("encoding"); }
std::string Subwords::decode(const std::vector<std::string>&) const { no_sentencepiece("decoding"); }
Vocabulary Subwords::vocabulary() const { no_sentencepiece("a vocabulary"); }

}  // namespace stepformer::transformer
