// The graded tests of chapter 00 and of label smoothing (docs/exercises.md): test [exN.M] grades exercise
// N.M, against values computed by hand or by other ops, so that it passes with its exercise (and those it
// declares it needs) solved and fails without.
#include <map>
#include <set>

#include "../helpers.h"
#include "autograd/engine.h"
#include "topological_order.h"  // autograd/src: the engine's private order, graded by exercise 0.4

using namespace stepformer;
using stepformer::test::close;
using stepformer::test::f64;
using stepformer::test::max_abs_diff;
using stepformer::test::mistake;

TEST_CASE("ex0.4: the topological order lists every node once, root first, each before those it sends to", "[ex0.4]") {
  // A diamond: a feeds b and c, both feed d, and a third path through b, longer than the others. The order
  // itself is checked here, no gradient computed: summing the paths' gradients is exercise 0.5.
  const Tensor x = f64({0.3, -0.7, 1.1}, {3}).set_requires_grad();
  const Tensor a = exp(x);
  const Tensor b = neg(a), c = tanh(a);
  const Tensor loss = sum(b + c + exp(b));
  Node* root = loss.grad_fn().get();
  std::set<Node*> reachable{root};  // found here by a walk of our own
  for (std::vector<Node*> todo{root}; !todo.empty();) {
    Node* n = todo.back();
    todo.pop_back();
    for (const Edge& e : n->edges)
      if (e.to && reachable.insert(e.to.get()).second) todo.push_back(e.to.get());
  }
  REQUIRE(reachable.size() == 8);  // sum, add, add, exp, neg, tanh, exp and x's accumulator
  const std::vector<Node*> order = topological_order(root);
  std::map<Node*, std::size_t> position;
  for (std::size_t i = 0; i < order.size(); ++i) {
    INFO("the order lists a node twice: it would run twice, passing its gradient on in parts");
    REQUIRE(position.emplace(order[i], i).second);
  }
  for (Node* n : reachable) {
    INFO("the order leaves out a reachable node: the gradient stops there");
    REQUIRE(position.count(n) == 1);
  }
  {
    INFO("the order lists nodes that are not in the graph");
    REQUIRE(order.size() == reachable.size());
  }
  {
    INFO("the root comes first: it holds the seed gradient");
    REQUIRE(order.front() == root);
  }
  for (Node* n : order)
    for (const Edge& e : n->edges) {
      if (!e.to) continue;
      INFO("the order puts a node before a node which sends it a gradient: it would run with a partial gradient");
      REQUIRE(position[n] < position[e.to.get()]);
    }
}

TEST_CASE("ex0.5: a tensor read by several ops gets the sum of their gradients", "[ex0.5]") {
  // Three ops read x, and each sends x's accumulator a gradient; any topological order runs them all before it.
  const Tensor x = f64({0.3, -0.7, 1.1}, {3}).set_requires_grad();
  sum(exp(x) + tanh(x) - x).backward();
  std::vector<double> want;
  for (double xi : {0.3, -0.7, 1.1}) want.push_back(std::exp(xi) + (1 - std::tanh(xi) * std::tanh(xi)) - 1);
  INFO(
      "x is read by exp, tanh and the subtraction: its gradient is the sum of the three (exp(x) + 1 - tanh(x)^2 - 1), "
      "not the last one to arrive nor the first");
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
    // A square gradient: summing the wrong axis gives an answer of the right shape, so only the values tell.
    std::vector<double> s(16);
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<double>(i);
    const Tensor square = f64(s, {4, 4});
    INFO(
        "dimensions where the target has size 1 (and g does not) are summed, kept as size 1: [4, 4] -> [4, 1] "
        "adds up each row, [4, 4] -> [1, 4] each column");
    const Tensor rows = sum_to(square, {4, 1}), columns = sum_to(square, {1, 4});
    if (rows.numel() == 4 && max_abs_diff(rows, {24, 28, 32, 36}) == 0)
      FAIL(mistake("wrong-axis",
                   "[4, 4] -> [4, 1] gave the column sums 24 28 32 36, not the row sums 6 22 38 54: "
                   "the size-1 dimension of the target is the last one, aligned from the right"));
    CHECK(close(rows, f64({6, 22, 38, 54}, {4, 1}), 0, 0));
    CHECK(close(columns, f64({24, 28, 32, 36}, {1, 4}), 0, 0));
  }
  {
    INFO("the leading dimensions the target lacks are summed away");
    CHECK(close(sum_to(g, {4}), f64({60, 66, 72, 78}, {4}), 0, 0));
    CHECK(close(sum_to(g, {}), f64({276}, {}), 0, 0));
  }
  INFO("dimensions where the target has size 1 (and g does not) are summed too, kept as size 1");
  CHECK(close(sum_to(g, {3, 1}), f64({60, 92, 124}, {3, 1}), 0, 0));  // leading and a size-1 dim
  CHECK(close(sum_to(g, {2, 1, 4}), f64({12, 15, 18, 21, 48, 51, 54, 57}, {2, 1, 4}), 0, 0));
}

TEST_CASE("ex7.2: cross-entropy with label smoothing, value and gradient, PAD rows ignored", "[ex7.2]") {
  const double s = 0.1;
  // The mean smoothed loss over the rows whose target is not `ignore`, and its gradient, by hand from
  // log_softmax and softmax (other ops).
  auto by_hand = [s](const Tensor& logits, const std::vector<std::int64_t>& targets, std::int64_t ignore) {
    const auto C = static_cast<std::size_t>(logits.size(1));
    const auto lp = log_softmax(logits.detach(), -1).to_vector<double>();
    const auto p = softmax(logits.detach(), -1).to_vector<double>();
    double total = 0, counted = 0;
    std::vector<double> grad(lp.size(), 0.0);
    for (std::size_t i = 0; i < targets.size(); ++i) {
      if (targets[i] == ignore) continue;
      counted += 1;
      const auto t = static_cast<std::size_t>(targets[i]);
      double mean_neg = 0;
      for (std::size_t c = 0; c < C; ++c) mean_neg -= lp[i * C + c] / static_cast<double>(C);
      total += (1 - s) * -lp[i * C + t] + s * mean_neg;
      for (std::size_t c = 0; c < C; ++c)
        grad[i * C + c] = p[i * C + c] - s / static_cast<double>(C) - (c == t ? 1 - s : 0);
    }
    for (double& g : grad) g /= counted;
    return std::pair{total / counted, f64(grad, logits.shape())};
  };
  auto int64s = [](const std::vector<std::int64_t>& v) {
    return from_vector(v, {static_cast<std::int64_t>(v.size())}, {DType::int64});
  };
  {
    const Tensor logits = f64({1, 2, 0.5, -1, 0, 3}, {2, 3}).set_requires_grad();
    const auto [want, grad] = by_hand(logits, {1, 2}, -100);
    const Tensor loss = cross_entropy(logits, int64s({1, 2}), -100, s);
    INFO("smoothed target: 1 - s on the true class plus s / C on every class");
    CHECK(loss.item() == Catch::Approx(want).epsilon(1e-12));
    const auto lp = log_softmax(logits.detach(), -1).to_vector<double>();
    CHECK(cross_entropy(logits, int64s({1, 2})).item() ==
          Catch::Approx((-lp[1] - lp[5]) / 2).epsilon(1e-12));  // s = 0: plain negative log-likelihood
    loss.backward();
    CHECK(close(logits.grad(), grad, 1e-12, 1e-12));
  }
  // Padded targets, as the decoder's are: ignore_index 0 is PAD, so rows 1 and 3 are not targets at all.
  const Tensor logits = f64({1, 2, 0.5, -1, 0, 3, 0.2, -0.4, 1.5, 2, -2, 0.7}, {4, 3}).set_requires_grad();
  const std::vector<std::int64_t> targets{1, 0, 2, 0};
  const auto [want, grad] = by_hand(logits, targets, 0);
  const double every_row_mean = by_hand(logits, targets, -1).first;  // PAD's rows scored as class 0
  const Tensor loss = cross_entropy(logits, int64s(targets), 0, s);
  {
    std::string diagnosis =
        "a row whose target is ignore_index (a PAD position) adds nothing to the loss and is left out of the mean's "
        "count";
    if (std::abs(loss.item() - every_row_mean * 4 / 2) < 1e-9)
      diagnosis = mistake("pad-rows-counted", "the loss of PAD rows (target ignore_index) added like any other row's");
    else if (std::abs(loss.item() - want * 2 / 4) < 1e-9)
      diagnosis = mistake("pad-rows-in-mean", "the mean divides by every row, PAD rows included, not by the targets");
    INFO(diagnosis);
    CHECK(loss.item() == Catch::Approx(want).epsilon(1e-12));
  }
  loss.backward();
  const auto g = logits.grad().to_vector<double>();
  {
    INFO(mistake("pad-rows-gradient", "a PAD row (target ignore_index) got a gradient; it must get zeros"));
    for (const std::size_t k : {3, 4, 5, 9, 10, 11}) CHECK(g[k] == 0.0);
  }
  INFO("every other row: (softmax - smoothed target) / the number of rows that are targets");
  CHECK(close(logits.grad(), grad, 1e-12, 1e-12));
}
