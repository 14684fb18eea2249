// The graded tests of chapter 00 and of label smoothing (docs/exercises.md): test [exN.M] grades exercise
// N.M, against values computed by hand or by other ops, so that it passes with its exercise (and those it
// declares it needs) solved and fails without.
#include "../helpers.h"

using namespace stepformer;
using stepformer::test::close;
using stepformer::test::f64;

TEST_CASE("ex0.4: backward visits a node only after every consumer has sent its gradient", "[ex0.4]") {
  // A diamond: a feeds b and c, both feed d. a's gradient is the sum of both paths, so a must run after b
  // and c; a walk in the wrong order passes a half-finished gradient on.
  const Tensor x = f64({0.3, -0.7, 1.1}, {3}).set_requires_grad();
  const Tensor a = exp(x);
  const Tensor b = neg(a), c = tanh(a);
  const Tensor d = b + c + exp(b);  // a third path through b, longer than the others
  INFO(
      "the gradient reaching x must sum every path through the graph, each once: a node runs once, after "
      "every node that sends it a gradient");
  sum(d).backward();
  std::vector<double> want;
  for (double xi : {0.3, -0.7, 1.1}) {
    const double ai = std::exp(xi), ti = std::tanh(ai);
    want.push_back((-1.0 + (1 - ti * ti) - std::exp(-ai)) * ai);
  }
  CHECK(close(x.grad(), f64(want, {3}), 1e-12, 1e-12));
}

TEST_CASE("ex0.1: the gradient of a product, with a broadcast operand and a tensor used twice", "[ex0.1]") {
  const Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3}).set_requires_grad();
  const Tensor b = f64({0.5, -1, 2}, {3}).set_requires_grad();
  {
    INFO(
        "d(a * b)/da = g * b and d(a * b)/db = g * a: the upstream g times the other operand, summed back to "
        "each operand's shape (b [3] was read by both rows of a [2, 3]: sum_to)");
    (a * b).backward(f64({1, -2, 0.5, 3, 1, -1}, {2, 3}));  // g given directly: not all ones
    CHECK(close(a.grad(), f64({0.5, 2, 1, 1.5, -1, -2}, {2, 3}), 0, 0));
    CHECK(close(b.grad(), f64({1 * 1 + 3 * 4, -2 * 2 + 1 * 5, 0.5 * 3 - 1 * 6}, {3}), 0, 0));
  }
  const Tensor x = f64({1.5, -2}, {2}).set_requires_grad();
  sum(x * x).backward();
  INFO("x * x: both operands are x, and both gradients add up: 2x");
  CHECK(close(x.grad(), f64({3, -4}, {2}), 0, 0));
}

TEST_CASE("ex0.2: the gradients of a matrix product, batched with a broadcast operand", "[ex0.2]") {
  const Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3}).set_requires_grad();
  const Tensor b = f64({1, 0, -1, 2, 0.5, 1, 1, -2, 3, 0, 2, 1}, {3, 4}).set_requires_grad();
  {
    INFO("d(a @ b)/da = g @ b^T [M, K] and d(a @ b)/db = a^T @ g [K, N]");
    sum(matmul(a, b)).backward();
    // d sum(a b) / d a[i, k] = sum_j b[k, j]; / d b[k, j] = sum_i a[i, k].
    CHECK(close(a.grad(), f64({2, 0.5, 6, 2, 0.5, 6}, {2, 3}), 1e-12, 0));
    CHECK(close(b.grad(), f64({5, 5, 5, 5, 7, 7, 7, 7, 9, 9, 9, 9}, {3, 4}), 1e-12, 0));
  }
  {
    const Tensor batched = f64({1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6}, {2, 2, 3}).set_requires_grad();
    const Tensor w = f64({1, 2, 3}, {3, 1}).set_requires_grad();
    sum(matmul(batched, w)).backward();
    INFO("w is shared by both batch entries: its gradient sums over the batch");
    CHECK(close(w.grad(), f64({0, 0, 0}, {3, 1}), 1e-12, 0));
    CHECK(close(batched.grad(), f64({1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3}, {2, 2, 3}), 1e-12, 0));
  }
  // A real batch broadcast: a [2, 2, 3] @ b [1, 3, 2], weighted by an upstream gradient that is not uniform,
  // so that summing over the batch and averaging over it give different answers.
  const std::vector<double> av{1, 2, 3, 4, 5, 6, -1, 0, 2, 3, -2, 1}, bv{1, 0, -1, 2, 0.5, 1},
      gv{1, 2, 3, 4, -1, 0.5, 2, 1};
  const Tensor a3 = f64(av, {2, 2, 3}).set_requires_grad(), b3 = f64(bv, {1, 3, 2}).set_requires_grad();
  INFO("b [1, 3, 2] is read by both batch entries of a [2, 2, 3]: its gradient sums over the batch (sum_to)");
  matmul(a3, b3).backward(f64(gv, {2, 2, 2}));  // the upstream gradient given directly: no mul (exercise 0.1)
  std::vector<double> ga(12, 0.0), gb(6, 0.0);  // ga[n] = g[n] b^T; gb = sum over n of a[n]^T g[n]
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 3; ++k)
        for (int j = 0; j < 2; ++j) {
          const auto g = gv[static_cast<std::size_t>(n * 4 + i * 2 + j)];
          ga[static_cast<std::size_t>(n * 6 + i * 3 + k)] += g * bv[static_cast<std::size_t>(k * 2 + j)];
          gb[static_cast<std::size_t>(k * 2 + j)] += av[static_cast<std::size_t>(n * 6 + i * 3 + k)] * g;
        }
  CHECK(close(a3.grad(), f64(ga, {2, 2, 3}), 1e-12, 0));
  CHECK(close(b3.grad(), f64(gb, {1, 3, 2}), 1e-12, 0));
}

TEST_CASE("ex0.3: sum_to sums exactly the broadcast dimensions away", "[ex0.3]") {
  std::vector<double> v(24);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  const Tensor g = f64(v, {2, 3, 4});
  INFO("sum_to adds up (never averages) the gradients of every read of a broadcast element");
  {
    INFO("the leading dimensions the target lacks are summed away");
    CHECK(close(sum_to(g, {4}), f64({60, 66, 72, 78}, {4}), 0, 0));
    CHECK(close(sum_to(g, {}), f64({276}, {}), 0, 0));
  }
  INFO("dimensions where the target has size 1 (and g does not) are summed too, kept as size 1");
  CHECK(close(sum_to(g, {3, 1}), f64({60, 92, 124}, {3, 1}), 0, 0));  // leading and a size-1 dim
  CHECK(close(sum_to(g, {2, 1, 4}), f64({12, 15, 18, 21, 48, 51, 54, 57}, {2, 1, 4}), 0, 0));
}

TEST_CASE("ex7.2: cross-entropy with label smoothing, value and gradient", "[ex7.2]") {
  const Tensor logits = f64({1, 2, 0.5, -1, 0, 3}, {2, 3}).set_requires_grad();
  const Tensor targets = from_vector(std::vector<std::int64_t>{1, 2}, {2}, {DType::int64});
  const double s = 0.1;
  const auto lp = log_softmax(logits.detach(), -1).to_vector<double>();
  const auto p = softmax(logits.detach(), -1).to_vector<double>();
  double want = 0;
  std::vector<double> grad(6);
  for (int i = 0; i < 2; ++i) {
    const int t = i == 0 ? 1 : 2;
    double mean_neg = 0;
    for (int c = 0; c < 3; ++c) mean_neg -= lp[static_cast<std::size_t>(3 * i + c)] / 3;
    want += ((1 - s) * -lp[static_cast<std::size_t>(3 * i + t)] + s * mean_neg) / 2;  // mean over the 2 rows
    for (int c = 0; c < 3; ++c)
      grad[static_cast<std::size_t>(3 * i + c)] =
          (p[static_cast<std::size_t>(3 * i + c)] - s / 3 - (c == t ? 1 - s : 0)) / 2;
  }
  const Tensor loss = cross_entropy(logits, targets, -100, s);
  INFO("smoothed target: 1 - s on the true class plus s / C on every class");
  CHECK(loss.item() == Catch::Approx(want).epsilon(1e-12));
  CHECK(cross_entropy(logits, targets).item() ==
        Catch::Approx((-lp[1] - lp[5]) / 2).epsilon(1e-12));  // s = 0: plain negative log-likelihood
  loss.backward();
  CHECK(close(logits.grad(), f64(grad, {2, 3}), 1e-12, 1e-12));
}
