// Losses against PyTorch 1.13: cross-entropy in every combination of reduction and label smoothing
// (with ignored targets), and MSE.
#include "../helpers.h"
#include "fixtures.h"
#include "nn/loss.h"

using namespace stepformer;
using stepformer::test::close;

TEST_CASE("cross_entropy matches torch for each reduction, with and without smoothing", "[nn][loss]") {
  const auto f = stepformer::test::fixture("cross_entropy");
  const std::pair<const char*, Reduction> reductions[] = {
      {"mean", Reduction::mean}, {"sum", Reduction::sum}, {"none", Reduction::none}};
  for (const auto& [name, reduction] : reductions) {
    for (const double s : {0.0, 0.1}) {
      const std::string key = std::string(name) + (s == 0.0 ? ".s0.0" : ".s0.1");
      INFO(key);
      Tensor logits = f.at("logits").detach().set_requires_grad();
      const Tensor loss = nn::cross_entropy(logits, f.at("targets"), -100, s, reduction);
      CHECK(close(loss, f.at("loss." + key)));
      loss.backward(f.at("upstream." + key));
      CHECK(close(logits.grad(), f.at("grad." + key)));
    }
  }
}

TEST_CASE("mse_loss matches torch", "[nn][loss]") {
  const auto f = stepformer::test::fixture("mse");
  Tensor a = f.at("input").detach().set_requires_grad();
  const Tensor loss = nn::mse_loss(a, f.at("target"));
  CHECK(close(loss, f.at("loss.mean")));
  loss.backward();
  CHECK(close(a.grad(), f.at("grad.mean")));
  CHECK(close(nn::mse_loss(a, f.at("target"), Reduction::sum), f.at("loss.sum")));
  REQUIRE_THROWS_WITH_ALL(nn::mse_loss(ones({2, 3}), ones({3})), ShapeError, "mse_loss", "[2, 3]", "[3]");
}
