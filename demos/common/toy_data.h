#pragma once
// The demos' toy data: the seed's three translation pairs, and the small encoder-decoder stack built on them.
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "transformer/config.h"

namespace CLI {
class App;
}  // namespace CLI

namespace stepformer::demo {

// The three toy pairs of seed 000 (docs/seeds.md: "我 有 一 个 好 朋 友" -> "I have a good friend ."), with
// vocabularies whose ids are dense and unique. (Seed 000 listed '.' twice in the target vocabulary, so '.' got id 11
// == the vocabulary size; here every token has exactly one id.) PAD is 0 in both; BOS 'S' and EOS 'E'.
struct ToyData {
  std::vector<std::string> src_vocab, tgt_vocab;  // id -> token
  std::vector<std::vector<std::string>> src, tgt_in, tgt_out;
  Tensor src_ids() const;     // int64 [3, 8]
  Tensor tgt_in_ids() const;  // int64 [3, 7]: "S I have ..."
};
const ToyData& toy_data();

// A small stack for the encoder and decoder demos (N 2, D 32, 4 heads, F = 2 D, toy vocabularies), with
// --layers, --d-model and --heads; call finish_stack_config after parsing.
transformer::Config small_stack_config();
void add_stack_options(CLI::App& app, transformer::Config& cfg);
void finish_stack_config(transformer::Config& cfg);  // d_ff = 2 d_model; vocabulary sizes of toy_data()

}  // namespace stepformer::demo
