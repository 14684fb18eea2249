// The one-screen scalar engine of chapter 00 (demos/00_autograd/scalar_engine.h): it must compute what the
// real engine computes, so that reading it first teaches the real algorithm and not a different one.
#include "../helpers.h"
#include "scalar_engine.h"

#include <map>

using stepformer::DType;
using stepformer::Tensor;

namespace {
// f(x, y) = x*x*y + tanh(x*y) / y - x: x is used four times (paths meet), y three, a node (x*y) twice.
template <class V>
V f(const V& x, const V& y) {
  const V xy = x * y;
  return x * x * y + tanh(xy) / y - x;
}
}  // namespace

TEST_CASE("the scalar engine's gradients equal the tensor engine's and finite differences", "[ch00][engine]") {
  const double x0 = 0.7, y0 = -1.3;
  const scalar_engine::Value x = scalar_engine::leaf(x0), y = scalar_engine::leaf(y0);
  const scalar_engine::Value out = f(x, y);
  scalar_engine::backward(out);

  Tensor tx = stepformer::scalar(x0, {DType::float64}).set_requires_grad(),
         ty = stepformer::scalar(y0, {DType::float64}).set_requires_grad();
  const Tensor tout = f(tx, ty);
  tout.backward();
  INFO("value " << out->data << " vs " << tout.item());
  CHECK(out->data == Catch::Approx(tout.item()).epsilon(1e-15));
  INFO("where paths meet the scalar engine must add the shares (+=), as the real engine does (exercise 0.5)");
  CHECK(x->grad == Catch::Approx(tx.grad().item()).epsilon(1e-12));
  CHECK(y->grad == Catch::Approx(ty.grad().item()).epsilon(1e-12));

  const double h = 1e-6;
  auto value = [](double a, double b) { return f(scalar_engine::leaf(a), scalar_engine::leaf(b))->data; };
  CHECK(x->grad == Catch::Approx((value(x0 + h, y0) - value(x0 - h, y0)) / (2 * h)).epsilon(1e-7));
  CHECK(y->grad == Catch::Approx((value(x0, y0 + h) - value(x0, y0 - h)) / (2 * h)).epsilon(1e-7));
}

TEST_CASE("the scalar engine's topological order lists each node once, inputs before their consumers",
          "[ch00][engine]") {
  const scalar_engine::Value x = scalar_engine::leaf(2.0);
  const scalar_engine::Value y = x * x;  // diamond: x feeds y twice, y feeds z twice
  const scalar_engine::Value z = y * x + y;
  const auto order = scalar_engine::topological_order(z.get());
  std::map<const scalar_engine::Node*, std::size_t> at;
  for (std::size_t i = 0; i < order.size(); ++i) {
    INFO("node " << i << " (" << order[i]->op << ") is listed twice");
    CHECK(at.emplace(order[i], i).second);
  }
  for (const scalar_engine::Node* n : order)
    for (const scalar_engine::Value& in : n->inputs) {
      INFO("an input (" << in->op << ") comes after its consumer (" << n->op << ")");
      CHECK(at.at(in.get()) < at.at(n));
    }
  scalar_engine::backward(z);
  CHECK(x->grad == 3 * 4.0 + 2 * 2.0);  // d(x^3 + x^2)/dx at 2
}
