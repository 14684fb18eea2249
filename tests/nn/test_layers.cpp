// Each layer's forward values and gradients against PyTorch 1.13 (float32; tolerance 1e-5 abs + rel),
// with the same weights loaded into our layer.
#include "../helpers.h"
#include "fixtures.h"
#include "nn/layers.h"

using namespace stepformer;
using stepformer::test::close;
using stepformer::test::fixture;

namespace {
// Loads the fixture's "param.*" tensors, runs forward and backward(dy), compares y and every gradient.
void check_against_fixture(nn::UnaryModule& layer, const nn::StateDict& f) {
  nn::StateDict params;
  for (const auto& [key, t] : f)
    if (key.starts_with("param.")) params.emplace(key.substr(6), t);
  layer.load_state_dict(params);
  Tensor x = f.at("x").detach().set_requires_grad();
  const Tensor y = layer(x);
  CHECK(close(y, f.at("y")));
  y.backward(f.at("dy"));
  CHECK(close(x.grad(), f.at("grad.x")));
  for (auto& [name, p] : layer.named_parameters()) {
    INFO("gradient of " << name);
    CHECK(close(p.grad(), f.at("grad." + name)));
  }
}
}  // namespace

TEST_CASE("Linear matches torch.nn.Linear, with and without bias", "[nn][layers]") {
  nn::Linear with_bias(4, 3);
  check_against_fixture(with_bias, fixture("linear"));
  nn::Linear no_bias(4, 3, false);
  CHECK(no_bias.named_parameters().size() == 1);
  check_against_fixture(no_bias, fixture("linear_nobias"));
}

TEST_CASE("LayerNorm matches torch.nn.LayerNorm, with and without affine", "[nn][layers]") {
  nn::LayerNorm ln(6);
  check_against_fixture(ln, fixture("layer_norm"));
  nn::LayerNorm plain(5, 1e-5, false);
  CHECK(plain.parameter_count() == 0);
  check_against_fixture(plain, fixture("layer_norm_noaffine"));
}

TEST_CASE("ReLU and GELU match torch", "[nn][layers]") {
  nn::ReLU relu;
  check_against_fixture(relu, fixture("relu"));
  nn::GELU gelu;
  check_against_fixture(gelu, fixture("gelu"));
}

TEST_CASE("Embedding matches torch.nn.Embedding with padding_idx", "[nn][layers]") {
  const auto f = fixture("embedding");
  nn::Embedding emb(7, 3, 2);
  emb.load_state_dict({{"weight", f.at("param.weight")}});
  const Tensor y = emb(f.at("ids"));
  CHECK(close(y, f.at("y")));
  y.backward(f.at("dy"));
  CHECK(close(emb.weight.grad(), f.at("grad.weight")));  // row 2 (padding) gets no gradient
}

TEST_CASE("default initialisation follows torch.nn", "[nn][layers]") {
  Generator gen(4);
  nn::Linear lin(64, 32, true, gen);
  const double bound = 1.0 / std::sqrt(64.0);
  for (const Tensor& p : {lin.weight, lin.bias}) {
    const auto v = p.to_vector<double>();
    CHECK(*std::max_element(v.begin(), v.end()) <= bound);
    CHECK(*std::min_element(v.begin(), v.end()) >= -bound);
    CHECK(*std::max_element(v.begin(), v.end()) > 0.9 * bound);  // the whole range is used
  }
  nn::Embedding emb(50, 16, 3, gen);
  CHECK(sum(narrow(emb.weight, 0, 3, 1) * narrow(emb.weight, 0, 3, 1)).item() == 0.0);  // padding row zero
  CHECK(std::abs(mean(emb.weight).item()) < 0.1);
  nn::LayerNorm ln(8);
  CHECK(ln.weight.to_vector<double>() == std::vector<double>(8, 1.0));
  CHECK(ln.bias.to_vector<double>() == std::vector<double>(8, 0.0));
  Generator a(7), b(7);
  CHECK(nn::Linear(5, 5, true, a).weight.to_vector<float>() == nn::Linear(5, 5, true, b).weight.to_vector<float>());
}

TEST_CASE("Dropout honours p and train/eval (seed 004 ignored its argument)", "[nn][layers]") {
  Generator gen(1);
  nn::Dropout drop(0.5, gen);
  const Tensor x = ones({64, 64});
  const Tensor train_out = drop(x);
  const auto v = train_out.to_vector<float>();
  CHECK(std::count(v.begin(), v.end(), 0.0f) > 1500);
  drop.eval();
  CHECK(drop(x).is_same(x));
  nn::Dropout none(0.0, gen);
  CHECK(none(x).is_same(x));  // p = 0: train and eval agree
  REQUIRE_THROWS_WITH_ALL(nn::Dropout(-0.1), ValueError, "Dropout", "-0.1");
}

TEST_CASE("Sequential loads a state dict written by PyTorch and computes the same output", "[nn][layers]") {
  auto model = nn::Sequential(
      {std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 2)});
  const auto state = fixture("sequential_state");  // keys 0.weight, 0.bias, 2.weight, 2.bias, as torch names them
  model.load_state_dict(state);
  const auto io = fixture("sequential_io");
  CHECK(close(model(io.at("x")), io.at("y")));
}

TEST_CASE("layers name the offending shape", "[nn][layers][errors]") {
  nn::Linear lin(512, 8);
  REQUIRE_THROWS_WITH_ALL(lin(ones({2, 7, 256})), ShapeError, "Linear expected [*, 512], got [2, 7, 256]");
  nn::LayerNorm ln(4);
  REQUIRE_THROWS_WITH_ALL(ln(ones({3})), ShapeError, "LayerNorm expected [*, 4], got [3]");
  REQUIRE_THROWS_WITH_ALL(nn::Embedding(5, 2, 5), IndexError, "padding_idx 5");
  nn::Embedding emb(5, 2);
  // .cpu(): a GPU (and cuda-sim) reports a bad id at the next copy from the device (docs/09); the CPU at the op.
  REQUIRE_THROWS_WITH_ALL(emb(from_vector(std::vector<std::int64_t>{5}, {1}, {DType::int64})).cpu(), IndexError,
                          "id 5");
}
