// Optimizers against 10-step trajectories from torch.optim (the same gradients fed in), global-norm
// clipping, and the schedules against their formulas.
#include <cmath>
#include <functional>
#include <memory>

#include "../helpers.h"
#include "fixtures.h"
#include "nn/optim.h"
#include "nn/schedule.h"

using namespace stepformer;
using stepformer::test::close;

namespace {
using Make = std::function<std::unique_ptr<nn::Optimizer>(nn::NamedTensors)>;

// Feeds the fixture's 10 gradients (loss = sum(p * g_k) has gradient exactly g_k) and compares the
// parameter after every step with torch's.
void check_trajectory(const std::string& name, const Make& make) {
  const auto f = stepformer::test::fixture("optimizers");
  Tensor p = zeros({3, 4}).set_requires_grad();
  {
    NoGradGuard no_grad;
    copy_(p, f.at("start"));
  }
  auto opt = make({{"p", p}});
  const Tensor expected = f.at(name + ".trajectory");  // [10, 3, 4]
  for (std::int64_t k = 0; k < 10; ++k) {
    opt->zero_grad();
    sum(p * squeeze(narrow(f.at("grads"), 0, k, 1), 0)).backward();
    opt->step();
    INFO(name << " after step " << k + 1);
    CHECK(close(p, squeeze(narrow(expected, 0, k, 1), 0), 1e-6, 1e-5));
  }
}
}  // namespace

TEST_CASE("SGD, with momentum, dampening, weight decay and Nesterov, follows torch.optim.SGD", "[nn][optim]") {
  check_trajectory("sgd", [](auto p) { return std::make_unique<nn::SGD>(p, nn::SGD::Options{.lr = 0.1}); });
  check_trajectory("sgd_momentum", [](auto p) {
    return std::make_unique<nn::SGD>(
        p, nn::SGD::Options{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
  });
  check_trajectory("sgd_nesterov", [](auto p) {
    return std::make_unique<nn::SGD>(p, nn::SGD::Options{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  });
}

TEST_CASE("Adam and AdamW follow torch.optim", "[nn][optim]") {
  check_trajectory("adam", [](auto p) {
    return std::make_unique<nn::Adam>(p, nn::Adam::Options{.lr = 0.01, .weight_decay = 0.01});
  });
  check_trajectory("adam_paper", [](auto p) {
    return std::make_unique<nn::Adam>(p, nn::Adam::Options{.lr = 0.01, .beta2 = 0.98, .eps = 1e-9});
  });
  check_trajectory("adamw", [](auto p) {
    return std::make_unique<nn::AdamW>(p, nn::AdamW::Options{.lr = 0.01, .weight_decay = 0.1});
  });
}

TEST_CASE("optimizers skip parameters without a gradient and refuse bad settings", "[nn][optim]") {
  Tensor a = ones({2}).set_requires_grad(), b = ones({2}).set_requires_grad();
  nn::SGD opt({{"a", a}, {"b", b}}, {.lr = 1.0});
  sum(a * 2.0).backward();
  opt.step();
  CHECK(a.to_vector<double>() == std::vector<double>{-1, -1});
  CHECK(b.to_vector<double>() == std::vector<double>{1, 1});
  REQUIRE_THROWS_WITH_ALL(nn::Adam({{"a", a}}, {.beta1 = 1.0}), ValueError, "betas");
  REQUIRE_THROWS_WITH_ALL(nn::SGD({{"c", ones({1})}}, {}), ValueError, "'c'", "does not require grad");
  REQUIRE_THROWS_WITH_ALL(opt.set_lr(-1), ValueError, "learning rate");
}

TEST_CASE("clip_grad_norm_ scales all gradients to the global norm, as torch", "[nn][optim]") {
  Tensor a = zeros({2}).set_requires_grad(), b = zeros({1}).set_requires_grad();
  (sum(a * from_vector(std::vector<double>{3, 0}, {2})) + sum(b * 4.0)).backward();  // grads (3, 0), (4): norm 5
  const double norm = nn::clip_grad_norm_({a, b}, 1.0).item();
  CHECK(norm == Catch::Approx(5.0));
  const double coef = 1.0 / (5.0 + 1e-6);
  CHECK(a.grad().at({0}) == Catch::Approx(3 * coef));
  CHECK(b.grad().at({0}) == Catch::Approx(4 * coef));
  CHECK(nn::clip_grad_norm_({a, b}, 10.0).item() == Catch::Approx(1.0).epsilon(1e-5));  // below the limit: unchanged
  CHECK(a.grad().at({0}) == Catch::Approx(3 * coef));
  // Gradients of two dtypes: each dtype's squares summed apart, every gradient scaled in its own dtype.
  Tensor c = zeros({1}, {DType::float64}).set_requires_grad(), d = zeros({1}).set_requires_grad();
  sum(c * 12.0).backward();  // with d: norm sqrt(144 + 25) = 13
  sum(d * 5.0).backward();
  CHECK(nn::clip_grad_norm_({d, c}, 1.0).item() == Catch::Approx(13.0));
  CHECK(c.grad().dtype() == DType::float64);
  CHECK(c.grad().at({0}) == Catch::Approx(12.0 / (13.0 + 1e-6)));
  CHECK(d.grad().at({0}) == Catch::Approx(5.0 / (13.0 + 1e-6)));
}

TEST_CASE("schedules equal their formulas", "[nn][schedule]") {
  const nn::NoamSchedule noam{512, 4000};
  for (std::int64_t step : {1, 100, 3999, 4000, 4001, 20000}) {
    const double s = static_cast<double>(step);
    CHECK(noam(step) == Catch::Approx(std::pow(512.0, -0.5) * std::min(std::pow(s, -0.5), s * std::pow(4000.0, -1.5))));
  }
  CHECK(noam(4000) == Catch::Approx(1.0 / std::sqrt(512.0 * 4000.0)));  // the peak
  CHECK(noam(0) == noam(1));
  CHECK(nn::NoamSchedule{512, 4000, 2.0}(10) == Catch::Approx(2 * noam(10)));

  const nn::LinearWarmup lin{1e-3, 10, 110};
  CHECK(lin(5) == Catch::Approx(5e-4));
  CHECK(lin(10) == Catch::Approx(1e-3));
  CHECK(lin(60) == Catch::Approx(5e-4));
  CHECK(lin(110) == 0.0);

  const nn::CosineWarmup cos{1e-3, 10, 110, 1e-5};
  CHECK(cos(5) == Catch::Approx(5e-4));
  CHECK(cos(10) == Catch::Approx(1e-3));
  CHECK(cos(60) == Catch::Approx(1e-5 + (1e-3 - 1e-5) * 0.5));
  CHECK(cos(200) == Catch::Approx(1e-5));
}
