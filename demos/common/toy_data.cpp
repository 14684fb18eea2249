#include "toy_data.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <sstream>

#include "autograd/ops.h"

namespace stepformer::demo {

namespace {
std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

Tensor encode(const std::vector<std::vector<std::string>>& sentences, const std::vector<std::string>& vocab) {
  std::vector<std::int64_t> ids;
  for (const auto& s : sentences)
    for (const auto& w : s) ids.push_back(std::find(vocab.begin(), vocab.end(), w) - vocab.begin());
  return from_vector(ids, {static_cast<std::int64_t>(sentences.size()), static_cast<std::int64_t>(sentences[0].size())},
                     {DType::int64});
}
}  // namespace

Tensor ToyData::src_ids() const { return encode(src, src_vocab); }
Tensor ToyData::tgt_in_ids() const { return encode(tgt_in, tgt_vocab); }

const ToyData& toy_data() {
  static const ToyData data = [] {
    ToyData d;
    d.src_vocab = words("P 我 有 一 个 好 朋 友 零 女 男");
    d.tgt_vocab = words("P S E I have a good friend . zero girl boy");
    const char* pairs[3][3] = {{"我 有 一 个 好 朋 友 P", "S I have a good friend .", "I have a good friend . E"},
                               {"我 有 零 个 女 朋 友 P", "S I have zero girl friend .", "I have zero girl friend . E"},
                               {"我 有 一 个 男 朋 友 P", "S I have a boy friend .", "I have a boy friend . E"}};
    for (const auto& p : pairs) {
      d.src.push_back(words(p[0]));
      d.tgt_in.push_back(words(p[1]));
      d.tgt_out.push_back(words(p[2]));
    }
    return d;
  }();
  return data;
}

transformer::Config small_stack_config() {
  transformer::Config cfg;
  cfg.n_layers = 2;
  cfg.d_model = 32;
  cfg.n_heads = 4;
  cfg.max_len = 16;
  return cfg;
}

void add_stack_options(CLI::App& app, transformer::Config& cfg) {
  app.add_option("--layers", cfg.n_layers, "N")->capture_default_str()->check(CLI::Range(1, 24));
  app.add_option("--d-model", cfg.d_model, "model size")->capture_default_str()->check(CLI::Range(2, 1024));
  app.add_option("--heads", cfg.n_heads, "attention heads")->capture_default_str()->check(CLI::Range(1, 64));
}

void finish_stack_config(transformer::Config& cfg) {
  cfg.d_ff = 2 * cfg.d_model;
  cfg.src_vocab = static_cast<std::int64_t>(toy_data().src_vocab.size());
  cfg.tgt_vocab = static_cast<std::int64_t>(toy_data().tgt_vocab.size());
}

}  // namespace stepformer::demo
