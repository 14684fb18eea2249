#include "transformer/subwords.h"

#include <fmt/format.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <span>
#include <sstream>

#include "nn/errors.h"
#include "nn/safetensors.h"

namespace stepformer::transformer {
namespace {

// SentencePiece reads training sentences through this interface; ours come from memory, not a file.
class Sentences : public sentencepiece::SentenceIterator {
 public:
  explicit Sentences(const std::vector<std::string>& texts) : texts_(texts) {}
  bool done() const override { return next_ >= texts_.size(); }
  void Next() override { ++next_; }
  const std::string& value() const override { return texts_[next_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& texts_;
  std::size_t next_ = 0;
};

}  // namespace

Subwords Subwords::train(const std::vector<std::string>& texts, const SubwordOptions& o) {
  if (o.model_type != "bpe" && o.model_type != "unigram")
    throw SubwordError(fmt::format("subwords: model type must be bpe or unigram, got '{}'", o.model_type));
  Sentences sentences(texts);
  std::string bytes;
  // Our ids, not SentencePiece's, go into the model (Vocabulary puts <pad> <bos> <eos> <unk> first), so its
  // <s> and </s> are switched off; <unk> must exist. hard_vocab_limit=false: a small corpus with fewer
  // possible pieces than vocab_size gets a smaller vocabulary rather than an error.
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      {{"model_type", o.model_type},
       {"vocab_size", std::to_string(o.vocab_size)},
       {"character_coverage", "1.0"},  // every character of the training text is a piece: no <unk> in it
       {"hard_vocab_limit", "false"},
       {"bos_id", "-1"},
       {"eos_id", "-1"},
       {"unk_id", "0"},
       {"num_threads", "1"},          // the same pieces on every machine
       {"input_sentence_size", "0"},  // all sentences, no random sample
       {"shuffle_input_sentence", "false"},
       {"minloglevel", "2"}},  // training is chatty on stderr; errors still come back in the status
      &sentences, &bytes);
  if (!status.ok())
    throw SubwordError(fmt::format("subwords: SentencePiece training ({}, {} pieces, {} sentences) failed: {}",
                                   o.model_type, o.vocab_size, texts.size(), status.ToString()));
  return from_bytes(std::move(bytes));
}

Subwords Subwords::from_bytes(std::string bytes) {
  auto processor = std::make_shared<sentencepiece::SentencePieceProcessor>();
  if (const auto status = processor->LoadFromSerializedProto(bytes); !status.ok())
    throw SubwordError("subwords: not a SentencePiece model: " + status.ToString());
  Subwords s;
  s.bytes_ = std::move(bytes);
  s.processor_ = std::move(processor);
  return s;
}

Subwords Subwords::load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  if (!in || !(bytes << in.rdbuf())) throw nn::IoError(fmt::format("cannot read the subword model {}", path.string()));
  try {
    return from_bytes(std::move(bytes).str());
  } catch (const SubwordError& e) {
    throw SubwordError(fmt::format("{}: {}", path.string(), e.what()));
  }
}

void Subwords::save(const std::filesystem::path& path) const {
  nn::write_file_atomically(path, std::as_bytes(std::span(bytes_.data(), bytes_.size())));
}

std::vector<std::string> Subwords::encode(std::string_view text) const {
  std::vector<std::string> pieces;
  if (const auto status = processor_->Encode(text, &pieces); !status.ok())
    throw SubwordError("subwords: cannot encode text: " + status.ToString());
  return pieces;
}

std::string Subwords::decode(const std::vector<std::string>& pieces) const {
  std::string text;
  if (const auto status = processor_->Decode(pieces, &text); !status.ok())
    throw SubwordError("subwords: cannot decode pieces: " + status.ToString());
  return text;
}

Vocabulary Subwords::vocabulary() const {
  Vocabulary v;
  for (int id = 0; id < processor_->GetPieceSize(); ++id)
    if (!processor_->IsUnknown(id) && !processor_->IsControl(id)) v.add(processor_->IdToPiece(id));
  return v;
}

}  // namespace stepformer::transformer
