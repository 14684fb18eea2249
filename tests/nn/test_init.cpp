// Initialisers: the distributions torch.nn.init documents, reproducible from a seed.
#include "../helpers.h"
#include "nn/init.h"

using namespace stepformer;

namespace {
std::pair<double, double> mean_std(const Tensor& t) {
  const auto v = t.to_vector<double>();
  double m = 0, s = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) s += (x - m) * (x - m);
  return {m, std::sqrt(s / static_cast<double>(v.size()))};
}
}  // namespace

TEST_CASE("fan in and fan out follow torch", "[nn][init]") {
  const Tensor w = empty({8, 3, 5});
  CHECK(nn::init::fan_in(w) == 15);
  CHECK(nn::init::fan_out(w) == 40);
  REQUIRE_THROWS_AS(nn::init::fan_in(empty({4})), ShapeError);
}

TEST_CASE("xavier and kaiming have the documented spread", "[nn][init]") {
  Generator gen(11);
  Tensor w = empty({200, 300});
  nn::init::xavier_uniform_(w, 1.0, gen);  // U(-b, b), b = sqrt(6 / 500)
  const double b = std::sqrt(6.0 / 500.0);
  auto [m, s] = mean_std(w);
  CHECK(std::abs(s - b / std::sqrt(3.0)) < 0.01 * b);
  nn::init::xavier_normal_(w, 2.0, gen);
  std::tie(m, s) = mean_std(w);
  CHECK(std::abs(s - 2.0 * std::sqrt(2.0 / 500.0)) < 0.02 * s);
  nn::init::kaiming_normal_(w, 0.0, gen);  // std = sqrt(2 / fan_in), fan_in = 300
  std::tie(m, s) = mean_std(w);
  CHECK(std::abs(s - std::sqrt(2.0 / 300.0)) < 0.02 * s);
  nn::init::kaiming_uniform_(w, std::sqrt(5.0), gen);  // torch.nn.Linear's: bound 1/sqrt(fan_in)
  const auto v = w.to_vector<double>();
  CHECK(*std::max_element(v.begin(), v.end()) <= 1.0 / std::sqrt(300.0));
  nn::init::ones_(w);
  CHECK(mean(w).item() == 1.0);
  nn::init::zeros_(w);
  CHECK(mean(w).item() == 0.0);
}

TEST_CASE("initialising a parameter is not recorded and works on leaves that require grad", "[nn][init]") {
  Tensor w = empty({3, 3}).set_requires_grad();
  Generator gen(1);
  nn::init::normal_(w, 0.0, 1.0, gen);
  CHECK(w.is_leaf());
  Generator again(1);
  Tensor w2 = empty({3, 3});
  nn::init::normal_(w2, 0.0, 1.0, again);
  CHECK(w.to_vector<float>() == w2.to_vector<float>());
}
