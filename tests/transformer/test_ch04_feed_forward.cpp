// Chapter 04: the position-wise feed-forward network.
#include "reference.h"
#include "transformer/feed_forward.h"

using namespace stepformer;
using namespace stepformer::test;

TEST_CASE("PositionwiseFeedForward matches PyTorch, with gradients", "[ch04]") {
  const auto f = chapter_fixture("04_ffn");
  transformer::PositionwiseFeedForward ffn(16, 32);
  ffn.load_state_dict(params(f));
  Tensor x = leaf(f, "x");
  const Tensor y = ffn.forward(x);
  CHECK(close(y, f.at("output.y")));
  y.backward(f.at("dy.y"));
  check_parameter_grads(ffn, f);
  CHECK(close(x.grad(), f.at("grad.input.x"), 1e-5, 1e-4));
}

TEST_CASE("each position is transformed independently, and the parameter count is 2 D F + F + D", "[ch04]") {
  Generator gen(6);
  transformer::PositionwiseFeedForward ffn(16, 64, 0.0, gen);
  CHECK(ffn.parameter_count() == 2 * 16 * 64 + 64 + 16);
  const Tensor x = randn({1, 5, 16}, gen);
  const Tensor together = ffn.forward(x);
  for (std::int64_t t = 0; t < 5; ++t) {
    const Tensor alone = ffn.forward(narrow(x, 1, t, 1));
    CHECK(close(alone, narrow(together, 1, t, 1), 1e-6, 0));
  }
}
