// Chapter 02: scaled dot-product attention, masks, multi-head attention.
#include "autograd/autocast.h"
#include "reference.h"
#include "transformer/attention.h"

using namespace stepformer;
using namespace stepformer::test;
using namespace stepformer::transformer;

TEST_CASE("scaled_dot_product_attention matches PyTorch with a pad mask, with gradients", "[ch02]") {
  const auto f = chapter_fixture("02_sdpa");
  Tensor q = leaf(f, "q"), k = leaf(f, "k"), v = leaf(f, "v");
  const Attention a = scaled_dot_product_attention(q, k, v, f.at("input.blocked"));
  CHECK(close(a.context, f.at("output.context")));
  CHECK(close(a.weights.tensor(), f.at("output.weights")));
  (sum(a.context * f.at("dy.context")) + sum(a.weights.tensor() * f.at("dy.weights"))).backward();
  CHECK(close(q.grad(), f.at("grad.input.q")));
  CHECK(close(k.grad(), f.at("grad.input.k")));
  CHECK(close(v.grad(), f.at("grad.input.v")));
}

// Chapter 11's rule for flash_attention under autocast, written out in PyTorch (flash_attention_bf16 in
// tools/fixtures/make_transformer_fixtures.py): q, k, v rounded to bfloat16, the unnormalised weights rounded before
// their product with v, float32 sums, the output rounded to bfloat16. Same operands, so float32's tolerance on the
// CPU. The CUDA and reference backends widen bfloat16 operands and keep the weights float32 (docs/11): there the
// output is within a bfloat16 ulp of the rule's largest value (each rounded to bfloat16, from either side of a
// midpoint) and the weights' half-ulp: 2^-7 + 2^-9 relative, 5/512.
TEST_CASE("under bfloat16 autocast flash_attention is PyTorch's rounding of each operand and weight", "[ch02][ch11]") {
  const auto f = chapter_fixture("02_sdpa");
  AutocastGuard autocast(DType::bfloat16);
  const Tensor out = flash_attention(f.at("input.q"), f.at("input.k"), f.at("input.v"), f.at("input.blocked"),
                                     attention_scale(f.at("input.q").size(-1)));
  CHECK(out.dtype() == DType::float32);
  const Tensor& rule = f.at("autocast_rule.context");
  if (out.device().type == DeviceType::cpu)
    CHECK(close(out, rule, 1e-6, 1e-6));
  else
    CHECK(off_by_largest(out, rule) <= 5.0 / 512);
  CHECK(max_abs_diff(out, f.at("output.context")) > 1e-4);  // and not the float32 attention
}

TEST_CASE("MultiHeadAttention matches PyTorch, weights and all parameter gradients", "[ch02]") {
  const auto f = chapter_fixture("02_mha");
  MultiHeadAttention mha(16, 2);
  mha.need_weights = true;  // the composite path, which returns the weights
  mha.load_state_dict(params(f));
  Tensor xq = leaf(f, "query"), xkv = leaf(f, "key_value");
  const Attention a = mha.forward(xq, xkv, xkv, f.at("input.blocked"));
  CHECK(a.context.shape() == Shape{2, 4, 16});
  CHECK(a.weights.tensor().shape() == Shape{2, 2, 4, 6});
  CHECK(close(a.context, f.at("output.y")));
  CHECK(close(a.weights.tensor(), f.at("output.weights")));
  (sum(a.context * f.at("dy.y")) + sum(a.weights.tensor() * f.at("dy.weights"))).backward();
  check_parameter_grads(mha, f);
  CHECK(close(xq.grad(), f.at("grad.input.query"), 1e-5, 1e-4));
  CHECK(close(xkv.grad(), f.at("grad.input.key_value"), 1e-5, 1e-4));
}

TEST_CASE("MultiHeadAttention uses flash attention unless need_weights: PyTorch's context and gradients", "[ch02]") {
  const auto f = chapter_fixture("02_mha");
  MultiHeadAttention mha(16, 2);
  mha.load_state_dict(params(f));
  Tensor xq = leaf(f, "query"), xkv = leaf(f, "key_value");
  const Attention a = mha.forward(xq, xkv, xkv, f.at("input.blocked"));
  CHECK_FALSE(a.weights.kept());  // never stored
  CHECK(close(a.context, f.at("output.y")));
  // The fixture's gradients are of sum(y dy.y) + sum(weights dy.weights); the second term's come from the
  // composite, whose context gradient is the same.
  Tensor yq = leaf(f, "query"), ykv = leaf(f, "key_value");
  MultiHeadAttention composite(16, 2);
  composite.load_state_dict(params(f));
  composite.need_weights = true;
  sum(composite.forward(yq, ykv, ykv, f.at("input.blocked")).context * f.at("dy.y")).backward();
  sum(a.context * f.at("dy.y")).backward();
  CHECK(close(xq.grad(), yq.grad(), 1e-5, 1e-5));
  CHECK(close(xkv.grad(), ykv.grad(), 1e-5, 1e-5));
  const auto flash_params = mha.named_parameters(), composite_params = composite.named_parameters();
  for (std::size_t i = 0; i < flash_params.size(); ++i) {
    INFO("the gradient of " << flash_params[i].first);
    CHECK(close(flash_params[i].second.grad(), composite_params[i].second.grad(), 1e-5, 1e-5));
  }
}

TEST_CASE("masks: PAD keys and future positions are blocked, built from shapes", "[ch02]") {
  const Tensor src = ids({5, 6, 0, 0, 7, 8, 9, 0}, 2);
  CHECK(pad_mask(src, 0).shape() == Shape{2, 1, 1, 4});
  CHECK(pad_mask(src, 0).to_vector<double>() == std::vector<double>{0, 0, 1, 1, 0, 0, 0, 1});
  CHECK(subsequent_mask(3).to_vector<double>() == std::vector<double>{0, 1, 1, 0, 0, 1, 0, 0, 0});
  CHECK_THROWS_WITH(subsequent_mask(2, default_device(), -1), Catch::Matchers::ContainsSubstring("subsequent_mask") &&
                                                                  Catch::Matchers::ContainsSubstring("start = -1"));
  const Tensor dec = decoder_mask(ids({5, 6, 0}, 1), 0);  // pad | future
  CHECK(dec.shape() == Shape{1, 1, 3, 3});
  CHECK(dec.to_vector<double>() == std::vector<double>{0, 1, 1, 0, 0, 1, 0, 0, 1});
}

TEST_CASE("masked weights are exactly 0 and rows sum to 1 over the keys they may see (seed 002)", "[ch02]") {
  Generator gen(2);
  MultiHeadAttention mha(16, 4, 0.0, gen);
  const Tensor x = randn({2, 5, 16}, gen);
  const Tensor tgt = ids({3, 4, 5, 0, 0, 3, 4, 5, 6, 7}, 2);
  const Tensor blocked = decoder_mask(tgt, 0);  // [2, 1, 5, 5]
  mha.need_weights = true;
  const Tensor w = mha.forward(x, x, x, blocked).weights.tensor();  // [2, 4, 5, 5]
  const auto wv = w.to_vector<double>();
  const auto bv = expand(blocked, {2, 4, 5, 5}).to_vector<double>();
  for (std::size_t i = 0; i < wv.size(); ++i)
    if (bv[i] != 0) CHECK(wv[i] == 0.0);
  const auto rows = sum(w, {-1}).to_vector<double>();
  for (double r : rows) CHECK(r == Catch::Approx(1.0).epsilon(1e-6));
}

TEST_CASE("changing a PAD token changes no other position's output", "[ch02]") {
  Generator gen(3);
  MultiHeadAttention mha(16, 2, 0.0, gen);
  const Tensor src = ids({4, 5, 6, 0}, 1);
  Tensor x = randn({1, 4, 16}, gen);
  const auto before = mha.forward(x, x, x, pad_mask(src, 0)).context;
  Tensor x2 = contiguous(x * 1.0);
  {
    NoGradGuard no_grad;
    Tensor last = narrow(x2, 1, 3, 1);
    copy_(last, randn({1, 1, 16}, gen));  // the PAD position's vector changes
  }
  const auto after = mha.forward(x2, x2, x2, pad_mask(src, 0)).context;
  CHECK(close(narrow(after, 1, 0, 3), narrow(before, 1, 0, 3), 1e-6, 0));
}

TEST_CASE("head split and merge round-trip; errors name the sizes", "[ch02][errors]") {
  Generator gen(1);
  const Tensor x = randn({2, 3, 8}, gen);
  const Tensor heads = split_heads(x, 4);
  CHECK(heads.shape() == Shape{2, 4, 3, 2});
  CHECK(merge_heads(heads).to_vector<float>() == x.to_vector<float>());
  REQUIRE_THROWS_WITH_ALL(MultiHeadAttention(10, 3), ValueError, "d_model 10", "n_heads 3");
  MultiHeadAttention mha(8, 2);
  REQUIRE_THROWS_WITH_ALL(mha.forward(x, randn({2, 3, 6}, gen), x), ShapeError, "[B, T, 8]", "[2, 3, 6]");
}

TEST_CASE("attention weights read where flash kept none: a ValueError that says how to keep them", "[ch02]") {
  Generator gen(5);
  MultiHeadAttention mha(8, 2, 0.0, gen);
  const Tensor x = randn({1, 3, 8}, gen);
  const Attention flash = mha.forward(x, x, x);
  CHECK_FALSE(flash.weights.kept());
  CHECK_THROWS_AS(flash.weights.tensor(), ValueError);
  CHECK_THROWS_WITH(flash.weights.tensor(), Catch::Matchers::ContainsSubstring("none were kept") &&
                                                Catch::Matchers::ContainsSubstring("need_weights"));
  mha.need_weights = true;
  const Attention composite = mha.forward(x, x, x);
  CHECK(composite.weights.tensor().shape() == Shape{1, 2, 3, 3});
  CHECK(close(composite.context, flash.context, 1e-6, 1e-6));
  nn::Linear no_attention(8, 8);
  CHECK_THROWS_WITH(keep_attention_weights(no_attention),
                    Catch::Matchers::ContainsSubstring("keep_attention_weights") &&
                        Catch::Matchers::ContainsSubstring("holds no MultiHeadAttention"));
}
