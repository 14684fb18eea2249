// Chapter 00 — autograd. Read docs/00_autograd.md beside this file.
//
// Part 0 runs micrograd's worked example, L = (a*b + c) * f, on the one-screen scalar engine
// (scalar_engine.h): the whole algorithm before the real one. Part 1 is the same example on tensors, every
// value and gradient printed (they must agree with part 0's) and its graph written as Graphviz; part 1b works the
// backward of a matmul and a broadcast by hand beside the engine's. Part 2 trains a
// 2-16-16-2 MLP on "two moons" with plain SGD and shows the loss going down and the learned decision regions as text.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "architecture.h"
#include "autograd/autograd.h"
#include "demo.h"
#include "scalar_engine.h"

namespace sf = stepformer;

namespace {

struct Args {
  int steps = 300;
  double lr = 0.5;
  stepformer::demo::CommonOptions common;
};

// --- part 0 ----------------------------------------------------------------------------------------------
// The gradients of L = (a*b + c) * f with respect to a, b, c, f on the scalar engine.
std::vector<double> scalar_example() {
  std::puts("== Part 0: L = (a*b + c) * f on the one-screen engine (demos/00_autograd/scalar_engine.h)");
  const scalar_engine::Value a = scalar_engine::leaf(2.0), b = scalar_engine::leaf(-3.0), c = scalar_engine::leaf(10.0),
                             f = scalar_engine::leaf(-2.0);
  const scalar_engine::Value L = (a * b + c) * f;
  scalar_engine::backward(L);
  const auto order = scalar_engine::topological_order(L.get());
  std::string ops;
  for (const scalar_engine::Node* n : order) ops += fmt::format("{}{}", ops.empty() ? "" : " ", n->op);
  fmt::print("topological order: {} ({} nodes; backward walks it from the right)\n", ops, order.size());
  fmt::print("L = {}; dL/da = {}, dL/db = {}, dL/dc = {}, dL/df = {}\n\n", L->data, a->grad, b->grad, c->grad, f->grad);
  return {a->grad, b->grad, c->grad, f->grad};
}

// --- part 1 ----------------------------------------------------------------------------------------------
// Returns false when the tensor engine's gradients differ from the scalar engine's (`expected`).
bool worked_example(const Args& args, const std::vector<double>& expected) {
  std::puts("== Part 1: L = (a*b + c) * f, micrograd's example, as 0-dim tensors");
  auto leaf = [](double v, const char* name) {
    return sf::scalar(v, {sf::DType::float64}).set_requires_grad().set_name(name);
  };
  sf::Tensor a = leaf(2.0, "a"), b = leaf(-3.0, "b"), c = leaf(10.0, "c"), f = leaf(-2.0, "f");
  sf::Tensor e = a * b;  // -6
  sf::Tensor d = e + c;  // 4
  sf::Tensor L = d * f;  // -8
  L.set_name("L");
  fmt::print("forward : e = a*b = {}, d = e+c = {}, L = d*f = {}\n", e.item(), d.item(), L.item());
  L.backward();
  fmt::print("backward: dL/da = {} (= f*b), dL/db = {} (= f*a), dL/dc = {} (= f), dL/df = {} (= d)\n", a.grad().item(),
             b.grad().item(), c.grad().item(), f.grad().item());
  const std::vector<double> got{a.grad().item(), b.grad().item(), c.grad().item(), f.grad().item()};
  const bool agree = got == expected;  // exact: the same products of the same doubles
  fmt::print("the same gradients as part 0's scalar engine: {}\n", agree ? "yes" : "NO");

  // The graph was freed by backward (no retain_graph); its shape is still there to draw.
  stepformer::demo::draw_dot(args.common.out, "00_graph", sf::to_dot(L));
  return agree;
}

// --- part 1b ---------------------------------------------------------------------------------------------
// The matmul and broadcast backward of docs/00_autograd.md section 5, worked: the formulas computed by hand (plain
// loops) beside the engine's gradients. Returns false when they differ.
bool matmul_example() {
  std::puts("\n== Part 1b: the backward of Y = A B + b, L = sum(Y * G), so dL/dY = G (docs/00 section 5)");
  const std::int64_t M = 2, K = 3, N = 2;
  const std::vector<double> a{1, 2, 3, 4, 5, 6}, bm{1, 0, 0, 1, 1, 1}, g{1, 2, 3, 4};  // A [2, 3], B [3, 2], G [2, 2]
  const sf::Options f64{sf::DType::float64};
  const sf::Tensor A = sf::from_vector(a, {M, K}, f64).set_requires_grad();
  const sf::Tensor B = sf::from_vector(bm, {K, N}, f64).set_requires_grad();
  const sf::Tensor bias = sf::from_vector(std::vector<double>{0.5, -0.5}, {1, N}, f64).set_requires_grad();
  const sf::Tensor G = sf::from_vector(g, {M, N}, f64);
  sf::sum(sf::add(sf::matmul(A, B), bias) * G).backward();
  std::vector<double> ga(M * K, 0), gb(K * N, 0), gbias(N, 0);  // G B^T, A^T G, and G summed over the rows
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t j = 0; j < N; ++j) {
        ga[i * K + k] += g[i * N + j] * bm[k * N + j];
        gb[k * N + j] += a[i * K + k] * g[i * N + j];
      }
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) gbias[j] += g[i * N + j];
  const auto show = [](const std::vector<double>& v) { return fmt::format("{}", fmt::join(v, " ")); };
  fmt::print("A [2, 3] = {}, B [3, 2] = {}, G [2, 2] = {} (row-major)\n", show(a), show(bm), show(g));
  bool agree = true;
  const auto check = [&](const char* what, const std::vector<double>& by_hand, const sf::Tensor& grad) {
    const bool same = grad.to_vector<double>() == by_hand;  // exact: small integers
    agree = agree && same;
    fmt::print("{:<32} by hand {:<22} engine {}  {}\n", what, show(by_hand), show(grad.to_vector<double>()),
               same ? "same" : "DIFFERENT");
  };
  check("dL/dA = G B^T      [2, 3]", ga, A.grad());
  check("dL/dB = A^T G      [3, 2]", gb, B.grad());
  check("dL/db = G's rows summed [1, 2]", gbias, bias.grad());
  return agree;
}

// --- part 2 ----------------------------------------------------------------------------------------------
// Two interleaved half circles with noise; class 0 on top, class 1 below (sklearn's make_moons).
std::pair<sf::Tensor, sf::Tensor> two_moons(std::int64_t n, sf::Generator& gen) {
  const auto t = sf::rand({n}, gen, {sf::DType::float64}).to_vector<double>();
  const auto noise = sf::normal({n, 2}, 0.0, 0.1, gen, {sf::DType::float64}).to_vector<double>();
  std::vector<double> xy(static_cast<std::size_t>(2 * n));
  std::vector<std::int64_t> label(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < label.size(); ++i) {
    const double angle = M_PI * t[i];
    label[i] = static_cast<std::int64_t>(i % 2);
    const double x = label[i] == 0 ? std::cos(angle) : 1.0 - std::cos(angle);
    const double y = label[i] == 0 ? std::sin(angle) : 0.5 - std::sin(angle);
    xy[2 * i] = x + noise[2 * i];
    xy[2 * i + 1] = y + noise[2 * i + 1];
  }
  return {sf::from_vector(xy, {n, 2}), sf::from_vector(label, {n}, {sf::DType::int64})};
}

struct Mlp {
  sf::Tensor w1, b1, w2, b2, w3, b3;  // [2,16] [16] [16,16] [16] [16,2] [2]

  explicit Mlp(sf::Generator& gen) {
    // U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as torch.nn.Linear's bias (and close to its weights).
    auto param = [&gen](sf::Shape shape, std::int64_t fan_in, const char* name) {
      const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
      return sf::uniform(shape, -bound, bound, gen).set_requires_grad().set_name(name);
    };
    w1 = param({2, 16}, 2, "w1"), b1 = param({16}, 2, "b1");
    w2 = param({16, 16}, 16, "w2"), b2 = param({16}, 16, "b2");
    w3 = param({16, 2}, 16, "w3"), b3 = param({2}, 16, "b3");
  }
  sf::Tensor forward(const sf::Tensor& x) const {             // x [N, 2] -> logits [N, 2]
    const sf::Tensor h1 = sf::tanh(sf::matmul(x, w1) + b1);   // [N, 16]
    const sf::Tensor h2 = sf::tanh(sf::matmul(h1, w2) + b2);  // [N, 16]
    return sf::matmul(h2, w3) + b3;                           // [N, 2]
  }
  std::vector<sf::Tensor*> parameters() { return {&w1, &b1, &w2, &b2, &w3, &b3}; }
};

double accuracy(const sf::Tensor& logits, const sf::Tensor& labels) {
  const auto l = logits.to_vector<double>();
  const auto y = labels.to_vector<std::int64_t>();
  std::size_t right = 0;
  for (std::size_t i = 0; i < y.size(); ++i) right += (l[2 * i + 1] > l[2 * i]) == (y[i] == 1);
  return static_cast<double>(right) / static_cast<double>(y.size());
}

// The learned regions as text: '.' / ':' for the predicted class, 'o' / 'x' for training points.
void draw_regions(const Mlp& mlp, const sf::Tensor& x, const sf::Tensor& y) {
  const int W = 60, H = 20;
  const double x0 = -1.5, x1 = 2.5, y0 = -1.0, y1 = 1.5;
  std::vector<double> grid;
  for (int r = 0; r < H; ++r)
    for (int c = 0; c < W; ++c) {
      grid.push_back(x0 + (x1 - x0) * (c + 0.5) / W);
      grid.push_back(y1 - (y1 - y0) * (r + 0.5) / H);
    }
  sf::NoGradGuard no_grad;
  const auto logits = mlp.forward(sf::from_vector(grid, {W * H, 2})).to_vector<double>();
  std::vector<std::string> canvas(H, std::string(W, ' '));
  for (int i = 0; i < W * H; ++i) canvas[i / W][i % W] = logits[2 * i + 1] > logits[2 * i] ? ':' : '.';
  const auto pts = x.to_vector<double>();
  const auto labels = y.to_vector<std::int64_t>();
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const int c = static_cast<int>((pts[2 * i] - x0) / (x1 - x0) * W),
              r = static_cast<int>((y1 - pts[2 * i + 1]) / (y1 - y0) * H);
    if (c >= 0 && c < W && r >= 0 && r < H) canvas[r][c] = labels[i] == 0 ? 'o' : 'x';
  }
  std::puts("decision regions ('.' class 0, ':' class 1; o and x are the training points):");
  for (const auto& line : canvas) fmt::print("  |{}|\n", line);
}

void train_mlp(const Args& args) {
  std::puts("\n== Part 2: a 2-16-16-2 MLP learns two moons with SGD (cross-entropy loss)");
  sf::Generator gen(args.common.seed);
  const auto [x, y] = two_moons(200, gen);  // x [200, 2], y [200]
  Mlp mlp(gen);
  std::int64_t count = 0;
  for (sf::Tensor* p : mlp.parameters()) count += p->numel();
  fmt::print("data: {} points; model: {} parameters; {} steps at lr {}\n", x.size(0), count, args.steps, args.lr);

  for (int step = 1; step <= args.steps; ++step) {
    const sf::Tensor logits = mlp.forward(x);
    const sf::Tensor loss = sf::cross_entropy(logits, y);
    loss.backward();  // fills p.grad() for each parameter
    {
      sf::NoGradGuard no_grad;  // the update itself must not be recorded
      for (sf::Tensor* p : mlp.parameters()) {
        sf::add_(*p, p->grad(), -args.lr);
        p->zero_grad();
      }
    }
    if (step == 1 || step % (args.steps / 10 > 0 ? args.steps / 10 : 1) == 0 || step == args.steps)
      fmt::print("step {:4d}  loss {:.4f}  accuracy {:5.1f}%\n", step, loss.item(), 100 * accuracy(logits, y));
  }
  draw_regions(mlp, x, y);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"00_autograd: reverse-mode autograd on micrograd's example, then a tiny MLP on two moons"};
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.add_option("--steps", args.steps, "SGD steps for the MLP")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--lr", args.lr, "learning rate")->capture_default_str();
  stepformer::demo::add_common_options(app, args.common);
  CLI11_PARSE(app, argc, argv);
  try {
    if (!worked_example(args, scalar_example()) || !matmul_example()) return 1;
    train_mlp(args);
    return 0;
  } catch (const std::exception& e) {
    return stepformer::demo::report_error("00_autograd", e);
  }
}
