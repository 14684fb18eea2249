// Chapter 05: EncoderLayer and Encoder.
#include "reference.h"
#include "transformer/encoder.h"

using namespace stepformer;
using namespace stepformer::test;
using namespace stepformer::transformer;

namespace {
// Closed form: token embedding V*D; per layer 4 projections (D*D + D), the FFN (2*D*F + F + D) and two
// LayerNorms (2*D each).
std::int64_t encoder_parameters(const Config& c) {
  const std::int64_t D = c.d_model, F = c.d_ff;
  return c.src_vocab * D + c.n_layers * (4 * (D * D + D) + (2 * D * F + F + D) + 2 * 2 * D);
}
}  // namespace

TEST_CASE("Encoder matches PyTorch on the seed's toy batch: memory and every gradient", "[ch05]") {
  const auto f = chapter_fixture("05_encoder");
  Encoder enc(small_config());
  enc.load_state_dict(params(f));
  const EncoderOutput out = enc.forward(f.at("input.src"));
  CHECK(out.memory.shape() == Shape{2, 8, 16});
  CHECK(close(out.memory, f.at("output.memory"), 1e-5, 1e-4));
  REQUIRE(out.attention.size() == 2);
  CHECK_FALSE(out.attention[1].kept());  // flash attention stores no weights
  keep_attention_weights(enc);
  CHECK(enc.forward(f.at("input.src")).attention[1].tensor().shape() == Shape{2, 2, 8, 8});
  out.memory.backward(f.at("dy.memory"));
  check_parameter_grads(enc, f);
}

TEST_CASE("parameter count equals the closed form; each sublayer has its own LayerNorm", "[ch05]") {
  const Config c = small_config();
  Encoder enc(c);
  CHECK(enc.parameter_count() == encoder_parameters(c));
  CHECK((*enc.layers)[0].norm_attn->norm != (*enc.layers)[0].norm_ffn->norm);
  CHECK(&(*enc.layers)[0] != &(*enc.layers)[1]);
}

TEST_CASE("every tensor the Encoder makes to require grad is one of its parameters (the leaf audit)", "[ch05]") {
  // Catches a layer built inside forward (seed 000's LayerNorm, docs/seeds.md) or a weight never registered.
  CHECK(unregistered_leaves([] {
          auto enc = std::make_shared<Encoder>(small_config());
          sum(enc->forward(ids({1, 2, 3, 4, 5, 6, 7, 0}, 1)).memory).backward();
          return enc;
        }) == std::vector<std::string>{});  // lists the shapes of any unregistered leaf
}

TEST_CASE("after one backward every encoder parameter has a nonzero gradient", "[ch05]") {
  Encoder enc(small_config());
  Generator gen(1);
  const Tensor memory = enc.forward(ids({1, 2, 3, 4, 5, 6, 7, 0}, 1)).memory;
  sum(memory * randn(memory.shape(), gen)).backward();
  for (auto& [name, p] : enc.named_parameters()) {
    INFO(name);
    CHECK(sum(p.grad() * p.grad()).item() > 0);
  }
}

TEST_CASE("padding does not change the real tokens' encodings", "[ch05]") {
  Encoder enc(small_config());
  enc.eval();
  const Tensor short_src = enc.forward(ids({1, 2, 3, 0}, 1)).memory;          // [1, 4, D]
  const Tensor long_src = enc.forward(ids({1, 2, 3, 0, 0, 0, 0}, 1)).memory;  // more PAD
  CHECK(close(narrow(long_src, 1, 0, 3), narrow(short_src, 1, 0, 3), 1e-5, 1e-5));
}

TEST_CASE("pre-norm adds a final LayerNorm; dropout p = 0 makes train and eval agree", "[ch05]") {
  Config c = small_config();
  c.pre_norm = true;
  Encoder pre(c);
  CHECK(pre.final_norm != nullptr);
  CHECK(pre.parameter_count() == encoder_parameters(c) + 2 * c.d_model);
  const Tensor src = ids({1, 2, 3, 0}, 1);
  const auto train = pre.forward(src).memory.to_vector<float>();
  pre.eval();
  CHECK(pre.forward(src).memory.to_vector<float>() == train);
}
