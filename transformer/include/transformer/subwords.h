#pragma once
// Chapter 07 — subword units: the paper's byte-pair encoding (section 5.1: "sentences were encoded using
// byte-pair encoding"), learned with SentencePiece (Kudo and Richardson 2018; Debian's libsentencepiece).
//
// A word the vocabulary has never seen is no longer <unk>: it is spelled in pieces it has seen,
// "verkehrsunfall" -> "▁verkehrs" "unfall". The model is trained at run time on the training split only,
// so no valid or test sentence shapes the vocabulary, and its bytes are saved beside a checkpoint so that
// `translate --load` splits text exactly as training did.
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/errors.h"
#include "transformer/data.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace stepformer::transformer {

// SentencePiece refused to train or to load a model (bad options, too little text, a corrupt file).
struct SubwordError : Error {
  using Error::Error;
};

struct SubwordOptions {
  std::string model_type = "bpe";  // or "unigram" (Kudo 2018): SentencePiece's two subword algorithms
  int vocab_size = 4000;           // pieces, SentencePiece's own <unk> <s> </s> included
};

class Subwords {
 public:
  // Learns pieces from `texts` (one sentence each). Deterministic: one thread, no sampling of sentences.
  static Subwords train(const std::vector<std::string>& texts, const SubwordOptions& options);
  // A model from train()'s bytes (serialized()) or from a file save() wrote; SubwordError when invalid.
  static Subwords from_bytes(std::string bytes);
  static Subwords load(const std::filesystem::path& path);  // IoError when unreadable
  void save(const std::filesystem::path& path) const;       // atomically (nn::write_file_atomically)

  std::vector<std::string> encode(std::string_view text) const;      // pieces, "▁" marking a word's start
  std::string decode(const std::vector<std::string>& pieces) const;  // the text again, spaces restored
  // The four specials first, then every piece of the model in SentencePiece's order.
  Vocabulary vocabulary() const;
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace stepformer::transformer
