// Chapter 06: DecoderLayer and Decoder.
#include "reference.h"
#include "transformer/decoder.h"

using namespace stepformer;
using namespace stepformer::test;
using namespace stepformer::transformer;

namespace {
std::int64_t decoder_parameters(const Config& c) {  // two attentions and three LayerNorms per layer
  const std::int64_t D = c.d_model, F = c.d_ff;
  return c.tgt_vocab * D + c.n_layers * (8 * (D * D + D) + (2 * D * F + F + D) + 3 * 2 * D);
}
}  // namespace

TEST_CASE("Decoder matches PyTorch: hidden states and every gradient, including the memory's", "[ch06]") {
  const auto f = chapter_fixture("06_decoder");
  Decoder dec(small_config());
  dec.load_state_dict(params(f));
  Tensor memory = leaf(f, "memory");
  const DecoderOutput out = dec.forward(f.at("input.tgt"), encoded(memory, f.at("input.src")));
  CHECK(out.hidden.shape() == Shape{2, 7, 16});
  CHECK(close(out.hidden, f.at("output.hidden"), 1e-5, 1e-4));
  CHECK_FALSE(out.cross_attention[0].kept());  // flash attention stores no weights
  keep_attention_weights(dec);
  CHECK(dec.forward(f.at("input.tgt"), encoded(memory, f.at("input.src"))).cross_attention[0].tensor().shape() ==
        Shape{2, 2, 7, 8});
  out.hidden.backward(f.at("dy.hidden"));
  check_parameter_grads(dec, f);
  CHECK(close(memory.grad(), f.at("grad.input.memory"), 1e-5, 1e-4));
}

TEST_CASE("causality: changing a later target token leaves earlier outputs unchanged", "[ch06]") {
  Decoder dec(small_config());
  dec.eval();
  Generator gen(4);
  const Tensor memory = randn({1, 5, 16}, gen);
  const Tensor src = ids({1, 2, 3, 4, 0}, 1);
  const Tensor a = dec.forward(ids({1, 3, 4, 5, 6}, 1), encoded(memory, src)).hidden;
  const Tensor b = dec.forward(ids({1, 3, 4, 9, 10}, 1), encoded(memory, src)).hidden;  // positions 3 and 4 differ
  CHECK(close(narrow(b, 1, 0, 3), narrow(a, 1, 0, 3), 1e-6, 0));
  CHECK_FALSE(close(narrow(b, 1, 3, 1), narrow(a, 1, 3, 1), 1e-6, 0));
}

TEST_CASE("self-attention weights are causal; cross-attention ignores PAD source tokens", "[ch06]") {
  Decoder dec(small_config());
  Generator gen(5);
  keep_attention_weights(dec);
  const DecoderOutput out = dec.forward(ids({1, 3, 4, 5}, 1), encoded(randn({1, 3, 16}, gen), ids({4, 5, 0}, 1)));
  const Tensor self = out.self_attention[0].tensor();  // [1, 2, 4, 4]
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = i + 1; j < 4; ++j) CHECK(self.at({0, 1, i, j}) == 0.0);
  for (std::int64_t i = 0; i < 4; ++i) CHECK(out.cross_attention[1].tensor().at({0, 0, i, 2}) == 0.0);
}

TEST_CASE("three distinct LayerNorms per decoder layer, each receiving gradient (seed 003 shared one)", "[ch06]") {
  const Config c = small_config();
  Decoder dec(c);
  CHECK(dec.parameter_count() == decoder_parameters(c));
  DecoderLayer& layer = (*dec.layers)[0];
  CHECK(layer.norm_self->norm != layer.norm_cross->norm);
  CHECK(layer.norm_cross->norm != layer.norm_ffn->norm);
  Generator gen(6);
  const Tensor h = dec.forward(ids({1, 3, 4}, 1), encoded(randn({1, 2, 16}, gen), ids({4, 5}, 1))).hidden;
  sum(h * randn(h.shape(), gen)).backward();
  for (auto& [name, p] : dec.named_parameters()) {
    INFO(name);
    CHECK(sum(p.grad() * p.grad()).item() > 0);
  }
}

TEST_CASE("every tensor the Decoder makes to require grad is one of its parameters (the leaf audit)", "[ch06]") {
  CHECK(unregistered_leaves([] {
          auto dec = std::make_shared<Decoder>(small_config());
          Generator gen(7);
          const EncoderOutput enc = encoded(randn({1, 2, 16}, gen), ids({4, 5}, 1));
          sum(dec->forward(ids({1, 3, 4}, 1), enc).hidden).backward();
          DecoderCache cache;  // the cached path builds its own projections of the memory
          (void)dec->step(ids({1}, 1), enc, cache);
          return dec;
        }) == std::vector<std::string>{});  // lists the shapes of any unregistered leaf
}

TEST_CASE("decoder errors name the shapes", "[ch06][errors]") {
  Decoder dec(small_config());
  REQUIRE_THROWS_WITH_ALL(dec.forward(ids({1, 2}, 1), encoded(zeros({1, 3, 16}), ids({1, 2}, 1))), ShapeError,
                          "memory [1, 3, 16]", "[1, 1, 1, 2]");
}
