// Chapter 01: positional encoding and the embedding step.
#include <cmath>

#include "reference.h"
#include "transformer/embedding.h"

using namespace stepformer;
using namespace stepformer::test;
using transformer::sinusoidal_table;

TEST_CASE("PE equals the paper's formula at sampled (pos, i), even and odd d (seed 003's doubled exponent)", "[ch01]") {
  const Tensor pe = sinusoidal_table(50, 16);
  for (std::int64_t pos : {0, 1, 7, 49})
    for (std::int64_t k : {0, 1, 5, 7}) {
      const double angle = static_cast<double>(pos) / std::pow(10000.0, 2.0 * static_cast<double>(k) / 16.0);
      CHECK(pe.at({pos, 2 * k}) == Catch::Approx(std::sin(angle)).margin(1e-6));
      CHECK(pe.at({pos, 2 * k + 1}) == Catch::Approx(std::cos(angle)).margin(1e-6));
    }
  const auto f = chapter_fixture("01_pe_table");  // PyTorch's, computed another way
  CHECK(close(pe, f.at("pe_50x16"), 1e-6, 0));
  CHECK(close(sinusoidal_table(7, 9), f.at("pe_7x9"), 1e-6, 0));
}

TEST_CASE("PE(pos + k) is a fixed linear function of PE(pos): a rotation per frequency", "[ch01]") {
  // For each pair (sin, cos) of frequency w: [sin(w(p+k)), cos(w(p+k))] = R(wk) [sin(wp), cos(wp)].
  const Tensor pe = sinusoidal_table(40, 8);
  const std::int64_t k = 3;
  for (std::int64_t pair = 0; pair < 4; ++pair) {
    const double w = 1.0 / std::pow(10000.0, 2.0 * static_cast<double>(pair) / 8.0);
    for (std::int64_t p : {0, 10, 30}) {
      const double s = pe.at({p, 2 * pair}), c = pe.at({p, 2 * pair + 1});
      CHECK(pe.at({p + k, 2 * pair}) == Catch::Approx(s * std::cos(w * k) + c * std::sin(w * k)).margin(1e-5));
      CHECK(pe.at({p + k, 2 * pair + 1}) == Catch::Approx(c * std::cos(w * k) - s * std::sin(w * k)).margin(1e-5));
    }
  }
}

TEST_CASE("TransformerEmbedding matches PyTorch: tokens * sqrt(d_model) + PE, and its gradient", "[ch01]") {
  const auto f = chapter_fixture("01_embedding");
  transformer::TransformerEmbedding emb(11, small_config());
  emb.load_state_dict(params(f));
  const Tensor y = emb.forward(f.at("input.ids"));
  CHECK(y.shape() == Shape{2, 8, 16});
  CHECK(close(y, f.at("output.y"), 1e-5, 1e-5));
  y.backward(f.at("dy.y"));
  check_parameter_grads(emb, f);
}

TEST_CASE("the embedding is scaled by sqrt(d_model) before PE is added (seed 003 omitted it)", "[ch01]") {
  transformer::Config cfg = small_config();
  transformer::TransformerEmbedding emb(11, cfg);
  const Tensor ids = from_vector(std::vector<std::int64_t>{3}, {1, 1}, {DType::int64});
  const Tensor expected = narrow(emb.tokens->weight, 0, 3, 1) * 4.0 + narrow(emb.pe, 0, 0, 1);  // sqrt(16) = 4
  CHECK(close(reshape(emb.forward(ids), {1, 16}), expected, 1e-6, 0));
}

TEST_CASE("tokens embedded at an offset get the PE rows of their positions (decoding with a cache)", "[ch01]") {
  transformer::TransformerEmbedding emb(11, small_config());
  const Tensor ids = from_vector(std::vector<std::int64_t>{1, 5, 7, 3}, {1, 4}, {DType::int64});
  const Tensor all = emb.forward(ids);
  for (std::int64_t t = 0; t < 4; ++t)
    CHECK(close(emb.forward(narrow(ids, 1, t, 1), t), narrow(all, 1, t, 1), 1e-6, 0));
  REQUIRE_THROWS_WITH_ALL(emb.forward(ids, 30), ShapeError, "length 34", "max_len 32");
}

TEST_CASE("embedding errors: sequence longer than max_len, ids out of range", "[ch01][errors]") {
  transformer::TransformerEmbedding emb(11, small_config());
  REQUIRE_THROWS_WITH_ALL(emb.forward(zeros({1, 33}, {DType::int64})), ShapeError, "length 33", "max_len 32");
  // .cpu(): a GPU (and cuda-sim) reports a bad id at the next copy from the device (docs/09); the CPU at the op.
  REQUIRE_THROWS_WITH_ALL(emb.forward(full({1, 2}, 11, {DType::int64})).cpu(), IndexError, "id 11", "11 ids");
  REQUIRE_THROWS_WITH_ALL(emb.forward(zeros({4}, {DType::int64})), ShapeError, "[B, T]");
}

TEST_CASE("dropout p = 0 makes train and eval outputs equal (seed 004 ignored its argument)", "[ch01]") {
  transformer::TransformerEmbedding emb(11, small_config());
  const Tensor ids = from_vector(std::vector<std::int64_t>{1, 2, 3}, {1, 3}, {DType::int64});
  const auto train = emb.forward(ids).to_vector<float>();
  emb.eval();
  CHECK(emb.forward(ids).to_vector<float>() == train);
}
