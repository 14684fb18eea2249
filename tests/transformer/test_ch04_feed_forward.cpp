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

TEST_CASE("a 1x1 convolution over [B, D, T] (seed 004's FFN) equals a Linear over [B, T, D]", "[ch04]") {
  // torch.nn.Conv1d(D, F, kernel_size=1) holds a weight [F, D, 1] and computes, at every position t,
  // out[b, f, t] = bias[f] + sum_d weight[f, d, 0] x[b, d, t]: the Linear's x[b, t, :] W^T + b on the
  // channels-first layout. Computed here by its definition, in plain loops, from the Linear's own weights.
  Generator gen(7);
  const std::int64_t B = 2, T = 3, D = 4, F = 5;
  nn::Linear linear(D, F, true, gen);
  const Tensor x = randn({B, T, D}, gen);
  const auto w = linear.weight.to_vector<double>(), bias = linear.bias.to_vector<double>();
  const auto x_channels_first = contiguous(transpose(x, 1, 2)).to_vector<double>();  // [B, D, T]
  std::vector<double> conv(static_cast<std::size_t>(B * F * T));                     // [B, F, T]
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t f = 0; f < F; ++f)
      for (std::int64_t t = 0; t < T; ++t) {
        double acc = bias[static_cast<std::size_t>(f)];
        for (std::int64_t d = 0; d < D; ++d)
          acc +=
              w[static_cast<std::size_t>(f * D + d)] * x_channels_first[static_cast<std::size_t>((b * D + d) * T + t)];
        conv[static_cast<std::size_t>((b * F + f) * T + t)] = acc;
      }
  const Tensor conv_back = transpose(from_vector(conv, {B, F, T}), 1, 2);  // [B, T, F], as seed 004 transposes back
  CHECK(close(linear(x), conv_back, 1e-6, 1e-6));
}
