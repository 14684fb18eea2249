// Chapter 03: LayerNorm(x + Dropout(Sublayer(x))), and the pre-norm option.
#include "nn/layers.h"
#include "reference.h"
#include "transformer/add_norm.h"

using namespace stepformer;
using namespace stepformer::test;

namespace {
void check_add_norm(bool pre) {
  const auto f = chapter_fixture(pre ? "03_add_norm_pre" : "03_add_norm_post");
  transformer::AddNorm an(16, 0.0, pre);
  nn::Linear sublayer(16, 16);
  nn::StateDict norm_params;  // the fixture holds the AddNorm's "norm.*" and the sublayer's "sublayer.*"
  for (auto& [k, t] : params(f))
    if (k.starts_with("norm.")) norm_params.emplace(k, t);
  an.load_state_dict(norm_params);
  sublayer.load_state_dict(params(f, "sublayer."));
  Tensor x = leaf(f, "x");
  const Tensor y = an.forward(x, [&](const Tensor& t) { return sublayer(t); });
  CHECK(close(y, f.at("output.y")));
  y.backward(f.at("dy.y"));
  check_parameter_grads(an, f);
  check_parameter_grads(sublayer, f, "sublayer.");
  CHECK(close(x.grad(), f.at("grad.input.x"), 1e-5, 1e-4));
}
}  // namespace

TEST_CASE("post-norm AddNorm matches PyTorch: LayerNorm(x + sublayer(x)) (seed 002 dropped the residual)", "[ch03]") {
  check_add_norm(false);
}

TEST_CASE("pre-norm AddNorm matches PyTorch: x + sublayer(LayerNorm(x))", "[ch03]") { check_add_norm(true); }

TEST_CASE("post-norm output has zero mean and unit variance per position before the affine part", "[ch03]") {
  Generator gen(5);
  transformer::AddNorm an(32, 0.0);
  const Tensor x = randn({2, 4, 32}, gen) * 5.0 + 3.0;
  const Tensor y = an.forward(x, [](const Tensor& t) { return t * 2.0; });
  const auto m = mean(y, {-1}).to_vector<double>();
  const auto v = mean(y * y, {-1}).to_vector<double>();
  for (double mm : m) CHECK(std::abs(mm) < 1e-5);
  for (double vv : v) CHECK(vv == Catch::Approx(1.0).epsilon(1e-3));
}
