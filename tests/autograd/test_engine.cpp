// The backward engine: accumulation, graph lifetime, grad mode, and in-place detection.
#include "../helpers.h"

using namespace stepformer;
using stepformer::test::f64;
using stepformer::test::max_abs_diff;

TEST_CASE("a tensor used twice gets the sum of both gradients", "[ch00][engine]") {
  // b = a + a; c = b + b  =>  c = 4a, dc/da = 4 (micrograd's classic bug: overwriting instead of adding).
  Tensor a = f64({1.5, -2.0}, {2}).set_requires_grad();
  Tensor b = a + a;
  Tensor c = b + b;
  sum(c).backward();
  CHECK(max_abs_diff(a.grad(), {4.0, 4.0}) == 0.0);
}

TEST_CASE("diamond-shaped graphs: each node runs after all its consumers", "[ch00][engine]") {
  Tensor x = f64({2.0}, {1}).set_requires_grad();
  Tensor y = x * x;      // 2x
  Tensor z = y * x + y;  // x^3 + x^2 -> 3x^2 + 2x = 16 at x = 2
  z.backward(ones_like(z));
  CHECK(x.grad().item() == 16.0);
}

TEST_CASE("repeated backward calls accumulate into leaves, as in PyTorch", "[ch00][engine]") {
  Tensor w = f64({1.0, 2.0}, {2}).set_requires_grad();
  for (int i = 0; i < 3; ++i) sum(w * 3.0).backward();  // a fresh graph each time
  CHECK(max_abs_diff(w.grad(), {9.0, 9.0}) == 0.0);
  w.zero_grad();
  CHECK_FALSE(w.grad().defined());
  sum(w * 3.0).backward();
  CHECK(max_abs_diff(w.grad(), {3.0, 3.0}) == 0.0);
}

// A leaf's first gradient is taken as it is when nothing else holds it, else copied: no two leaves, and no leaf and
// the caller, may share a gradient's memory, or an in-place change to one (clipping, an optimizer) changes both.
TEST_CASE("a leaf's gradient shares memory with no other leaf's gradient and no tensor of the caller",
          "[ch00][engine]") {
  Tensor a = f64({1.0, 2.0}, {2}).set_requires_grad(), b = f64({3.0, 4.0}, {2}).set_requires_grad();
  (a + b).backward(ones({2}, {DType::float64}));  // add hands one gradient to both inputs
  Tensor ga = a.grad();
  mul_(ga, scalar(3.0, {DType::float64}));
  CHECK(max_abs_diff(a.grad(), {3.0, 3.0}) == 0.0);
  CHECK(max_abs_diff(b.grad(), {1.0, 1.0}) == 0.0);

  Tensor c = f64({5.0, 6.0}, {2}).set_requires_grad();
  const Tensor seed = f64({7.0, 8.0}, {2});
  (c + 0.0).backward(seed);  // add's backward passes the caller's tensor through
  Tensor gc = c.grad();
  mul_(gc, scalar(2.0, {DType::float64}));
  CHECK(max_abs_diff(seed, {7.0, 8.0}) == 0.0);
  CHECK(max_abs_diff(c.grad(), {14.0, 16.0}) == 0.0);

  Tensor d = f64({1.0, 1.0}, {2}).set_requires_grad();
  sum(d * 2.0).backward();  // a gradient made for d alone: taken as it is, the same values
  CHECK(max_abs_diff(d.grad(), {2.0, 2.0}) == 0.0);
}

TEST_CASE("a post-accumulate hook runs once per backward, after the leaf's whole gradient is in", "[ch00][engine]") {
  // w is used by three ops whose gradients reach its accumulator as one sum: the hook must see 2 + 3 + 4 = 9 and
  // run once, after a (which needs no gradient) and the other leaf v, in the order the engine reaches them.
  Tensor w = f64({1.0}, {1}).set_requires_grad();
  Tensor v = f64({1.0}, {1}).set_requires_grad();
  std::vector<std::pair<std::string, double>> seen;
  const std::uint64_t handle = w.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    CHECK(leaf.is_same(w));
    seen.emplace_back("w", leaf.grad().item());
  });
  v.register_post_accumulate_grad_hook([&](const Tensor& leaf) { seen.emplace_back("v", leaf.grad().item()); });
  sum(w * 2.0 + w * 3.0 + (w * 4.0) * v).backward();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].second + seen[1].second == 9.0 + 4.0);
  for (const auto& [name, g] : seen) CHECK(g == (name == "w" ? 9.0 : 4.0));
  sum(w * 5.0).backward();  // the second backward's hook sees the accumulated grad: 9 + 5
  REQUIRE(seen.size() == 3);
  CHECK(seen[2] == std::pair<std::string, double>{"w", 14.0});
  w.remove_post_accumulate_grad_hook(handle);  // removed: a third backward calls nothing
  sum(w * 5.0).backward();
  CHECK(seen.size() == 3);
  Tensor y = w * 2.0;
  REQUIRE_THROWS_WITH_ALL(y.register_post_accumulate_grad_hook([](const Tensor&) {}), AutogradError,
                          "register_post_accumulate_grad_hook", "leaf");
}

TEST_CASE("retain_graph allows a second backward; without it the graph is freed", "[ch00][engine]") {
  Tensor w = f64({1.0, 2.0}, {2}).set_requires_grad();
  Tensor loss = sum(w * w);
  loss.backward({}, /*retain_graph=*/true);
  loss.backward();
  CHECK(max_abs_diff(w.grad(), {4.0, 8.0}) == 0.0);
  REQUIRE_THROWS_WITH_ALL(loss.backward(), AutogradError, "second time", "retain_graph");
}

TEST_CASE("backward on a non-scalar needs an explicit gradient", "[ch00][engine][errors]") {
  Tensor w = f64({1.0, 2.0}, {2}).set_requires_grad();
  Tensor y = w * 2.0;
  REQUIRE_THROWS_WITH_ALL(y.backward(), AutogradError, "backward", "one-element", "[2]");
  REQUIRE_THROWS_WITH_ALL(y.backward(f64({1.0}, {1})), ShapeError, "[1]", "[2]");
  y.backward(f64({1.0, 10.0}, {2}));
  CHECK(max_abs_diff(w.grad(), {2.0, 20.0}) == 0.0);
}

TEST_CASE("requires_grad propagates; no-grad guard and detach stop it", "[ch00][engine]") {
  Tensor w = f64({1.0}, {1}).set_requires_grad();
  Tensor c = f64({2.0}, {1});
  CHECK((w * c).requires_grad());
  CHECK_FALSE((c * c).requires_grad());
  CHECK_FALSE((w * c).is_leaf());
  {
    NoGradGuard guard;
    CHECK_FALSE(grad_enabled());
    Tensor y = w * c;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
  }
  CHECK(grad_enabled());
  Tensor d = (w * c).detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  REQUIRE_THROWS_WITH_ALL(sum(d).backward(), AutogradError, "does not require grad");
  REQUIRE_THROWS_WITH_ALL((w * c).set_requires_grad(false), AutogradError, "only leaves", "mul");
}

TEST_CASE("gradients flow only to inputs that require them", "[ch00][engine]") {
  Tensor a = f64({1.0, 2.0}, {2}).set_requires_grad();
  Tensor b = f64({3.0, 4.0}, {2});
  sum(a * b).backward();
  CHECK(max_abs_diff(a.grad(), {3.0, 4.0}) == 0.0);
  CHECK_FALSE(b.grad().defined());
}

TEST_CASE("the graph is released after backward: a 2,000-step loop keeps memory flat", "[ch00][engine]") {
  Generator gen(3);
  Tensor w = randn({16, 8}, gen).set_requires_grad();
  Tensor x = randn({4, 16}, gen);
  std::size_t bytes_after_warmup = 0;
  std::int64_t nodes_after_warmup = 0;
  for (int step = 0; step < 2000; ++step) {
    {
      Tensor loss = mean(pow(tanh(matmul(x, w)), 2.0));
      loss.backward();
      NoGradGuard no_grad;
      add_(w, w.grad(), -0.01);
      w.zero_grad();
    }  // everything of this step is out of scope here
    if (step == 9) {
      bytes_after_warmup = bytes_in_use();
      nodes_after_warmup = Node::live_count();
    }
  }
  CHECK(bytes_in_use() == bytes_after_warmup);
  CHECK(Node::live_count() == nodes_after_warmup);
}

TEST_CASE("a graph that goes out of scope frees its nodes and saved tensors", "[ch00][engine]") {
  const std::int64_t nodes_before = Node::live_count();
  const std::size_t bytes_before = bytes_in_use();
  {
    Tensor w = ones({64, 64}).set_requires_grad();
    Tensor y = sum(exp(matmul(w, w)) * 0.0);  // never backpropagated
    CHECK(Node::live_count() > nodes_before);
  }
  CHECK(Node::live_count() == nodes_before);
  CHECK(bytes_in_use() == bytes_before);
}

TEST_CASE("backward walks, and destruction frees, a 100,000-op chain without recursion", "[ch00][engine]") {
  Tensor x = f64({1.0}, {1}).set_requires_grad();
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = y + 0.0;
  y.backward();
  CHECK(x.grad().item() == 1.0);
}

TEST_CASE("an in-place change to a tensor saved for backward is detected", "[ch00][engine][errors]") {
  Tensor w = f64({1.0, 2.0}, {2}).set_requires_grad();
  Tensor x = f64({3.0, 4.0}, {2});
  Tensor y = sum(w * x);  // mul saved x
  fill_(x, 0.0);          // ...which is now changed
  REQUIRE_THROWS_WITH_ALL(y.backward(), InplaceError, "backward of 'mul'", "modified in place", "version");

  Tensor e = exp(w);                               // exp saved its own output
  Tensor view_of_e = narrow(e.detach(), 0, 0, 1);  // a view shares the version counter
  fill_(view_of_e, 5.0);
  REQUIRE_THROWS_WITH_ALL(sum(e).backward(), InplaceError, "exp");
}

// Each op checks the versions of exactly the tensors its backward reads: a write to one of them is an error, a write
// to an input it does not read is not.
TEST_CASE("matmul's backward checks only the operand it reads", "[ch00][engine][errors]") {
  Tensor w = f64({1.0, 2.0, 3.0, 4.0}, {2, 2}).set_requires_grad();
  Tensor x = f64({1.0, -1.0, 2.0, 0.5}, {2, 2});  // needs no gradient, so dw = x^T g reads x and not w
  Tensor y = sum(matmul(x, w));
  {
    NoGradGuard no_grad;
    fill_(w, 7.0);  // w is not read by the backward
  }
  y.backward();
  CHECK(w.grad().at({0, 0}) == 3.0);  // column sums of x: 1 + 2, -1 + 0.5
  CHECK(w.grad().at({1, 1}) == -0.5);

  Tensor y2 = sum(matmul(x, w));
  fill_(x, 0.0);  // x is read
  REQUIRE_THROWS_WITH_ALL(y2.backward(), InplaceError, "backward of 'matmul'", "modified in place");
}

TEST_CASE("max's backward checks its own output, which it compares the input with", "[ch00][engine][errors]") {
  Tensor a = f64({1.0, 5.0, 3.0}, {3}).set_requires_grad();
  Tensor m = max(a, {0}, /*keepdim=*/true);
  Tensor loss = sum(m);
  {
    NoGradGuard no_grad;
    fill_(m, 3.0);  // the gradient would now go to the 3, not to the 5
  }
  REQUIRE_THROWS_WITH_ALL(loss.backward(), InplaceError, "backward of 'max'", "modified in place");
}

TEST_CASE("layer_norm's backward does not read its bias; flash_attention's reads its mask", "[ch00][engine][errors]") {
  Tensor x = f64({1.0, 2.0, 4.0, 8.0}, {2, 2}).set_requires_grad();
  Tensor w = f64({1.0, 1.0}, {2}).set_requires_grad(), b = f64({0.0, 0.0}, {2}).set_requires_grad();
  Tensor y = sum(layer_norm(x, w, b) * f64({1.0, 3.0}, {2}));
  {
    NoGradGuard no_grad;
    fill_(b, 1.0);
  }
  y.backward();
  CHECK(b.grad().at({1}) == 6.0);  // 3 per row, two rows

  Tensor q = f64({0.1, 0.2, 0.3, 0.4}, {1, 1, 2, 2}).set_requires_grad();
  Tensor blocked = gt(f64({0.0, 1.0, 0.0, 0.0}, {1, 1, 2, 2}), f64({0.5}, {1}));  // query 0 cannot see key 1
  Tensor z = sum(flash_attention(q, q, q, blocked, 1.0));
  fill_(blocked, 0.0);  // the backward would recompute other weights than the forward used
  REQUIRE_THROWS_WITH_ALL(z.backward(), InplaceError, "backward of 'flash_attention'", "modified in place");
}

TEST_CASE("a backward that reads a tensor it did not save is an error, so no in-place write to it goes unseen",
          "[ch00][engine][errors]") {
  // A hand-recorded y = w * x whose backward captures x instead of saving it: record() cannot check x's version,
  // so a later in-place write would silently change the gradient (here to 0). The engine sees the read instead.
  const Tensor w = f64({1.0, 2.0}, {2}).set_requires_grad();
  Tensor x = f64({3.0, 4.0}, {2});
  auto captured = [&x](const Tensor& g) -> Gradients { return {g * x}; };
  auto product = [&w, &x] {
    NoGradGuard no_grad;
    return w * x;
  };
  Tensor y = product();
  record(Op::mul, y, {w}, captured);
  fill_(x, 0.0);
  REQUIRE_THROWS_WITH_ALL(sum(y).backward(), AutogradError, "backward of 'mul'", "did not save", "[2]");

  Tensor y2 = product();  // the same mistake without a write is the same error: the read itself is wrong
  record(Op::mul, y2, {w}, captured);
  REQUIRE_THROWS_WITH_ALL(sum(y2).backward(), AutogradError, "did not save");

  Tensor y3 = product();  // saved, the same formula reads x through its parameter, and the write is caught
  record(Op::mul, y3, {w}, {x}, [](const Tensor& g, const Tensor& saved_x) -> Gradients { return {g * saved_x}; });
  fill_(x, 1.0);
  REQUIRE_THROWS_WITH_ALL(sum(y3).backward(), InplaceError, "backward of 'mul'", "modified in place");
}

TEST_CASE("in-place writes to tensors that require grad are refused while grad mode is on", "[ch00][engine][errors]") {
  Tensor w = f64({1.0, 2.0}, {2}).set_requires_grad();
  REQUIRE_THROWS_WITH_ALL(fill_(w, 0.0), AutogradError, "fill_", "NoGradGuard");
  NoGradGuard guard;
  fill_(w, 0.5);
  CHECK(w.at({1}) == 0.5);
}

TEST_CASE("to(dtype) is differentiable between float types", "[ch00][engine]") {
  Tensor a = f64({1.0, 2.0}, {2}).set_requires_grad();
  Tensor y = a.to(DType::float32) * 3.0;
  CHECK(y.dtype() == DType::float32);
  sum(y).backward();
  REQUIRE(a.grad().dtype() == DType::float64);
  CHECK(max_abs_diff(a.grad(), {3.0, 3.0}) == 0.0);
}

TEST_CASE("a node's backward function runs once per backward and gives every input its gradient", "[ch00][engine]") {
  // A custom op recorded by hand: out = 2a + 3b. The engine must call its one backward function once (not
  // once per input, as an engine with one formula per edge would), and route each gradient to its input.
  const Tensor a = f64({1, 2}, {2}).set_requires_grad(), b = f64({3, 4}, {2}).set_requires_grad();
  Tensor out;
  {
    NoGradGuard no_grad;
    out = a * 2.0 + b * 3.0;
  }
  int calls = 0;
  record(Op::add, out, {a, b}, [&calls](const Tensor& g) -> Gradients {
    ++calls;
    return {g * 2.0, g * 3.0};
  });
  sum(out).backward();
  CHECK(calls == 1);
  CHECK(max_abs_diff(a.grad(), {2, 2}) == 0.0);
  CHECK(max_abs_diff(b.grad(), {3, 3}) == 0.0);
}

TEST_CASE("an input that needs no gradient is skipped; a missing gradient that is needed is an error",
          "[ch00][engine][errors]") {
  const Tensor a = f64({1, 2}, {2}).set_requires_grad(), constant = f64({5, 6}, {2});
  Tensor out;
  {
    NoGradGuard no_grad;
    out = a * constant;
  }
  record(Op::mul, out, {a, constant}, {constant}, [](const Tensor& g, const Tensor& c) -> Gradients {
    return {g * c, Tensor()};
  });
  sum(out).backward();  // the constant's gradient was never computed, and nothing asks for it
  CHECK(max_abs_diff(a.grad(), {5, 6}) == 0.0);

  Tensor bad;
  {
    NoGradGuard no_grad;
    bad = a * 2.0;
  }
  record(Op::mul, bad, {a}, [](const Tensor&) -> Gradients { return {Tensor()}; });
  REQUIRE_THROWS_WITH_ALL(sum(bad).backward(), Error, "backward of 'mul' produced no gradient for input 0");
}
