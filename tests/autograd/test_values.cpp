// Forward values against closed forms and values printed by PyTorch 1.13 (quoted in each test).
#include <omp.h>
#include <catch2/catch_approx.hpp>

#include "../helpers.h"

using namespace stepformer;
using stepformer::test::close;
using stepformer::test::f64;
using stepformer::test::max_abs_diff;

TEST_CASE("softmax and log_softmax values, stable for large inputs", "[ch00][values]") {
  // torch.softmax(torch.tensor([1., 2., 3.]), 0)
  CHECK(max_abs_diff(softmax(f64({1, 2, 3}, {3})), {0.09003057317038046, 0.24472847105479767, 0.6652409557748219}) <
        1e-15);
  CHECK(max_abs_diff(softmax(f64({1000, 1001}, {2})), {0.2689414213699951, 0.7310585786300049}) < 1e-15);
  CHECK(max_abs_diff(log_softmax(f64({1000, 1001}, {2})), {-1.3132616875182228, -0.3132616875182228}) < 1e-12);
  const Tensor rows = softmax(f64({1, 2, 3, 4, 5, 6}, {2, 3}), 0);  // over columns
  CHECK(rows.at({0, 0}) + rows.at({1, 0}) == Catch::Approx(1.0));
}

TEST_CASE("masked positions get exactly zero attention weight", "[ch00][values]") {
  const Tensor scores = f64({0.3, 2.0, -1.0, 0.5}, {1, 4});
  const Tensor mask = from_vector(std::vector<double>{0, 1, 0, 1}, {1, 4}, {DType::boolean});
  const Tensor w = softmax(masked_fill(scores, mask, -INFINITY));
  CHECK(w.at({0, 1}) == 0.0);
  CHECK(w.at({0, 3}) == 0.0);
  CHECK(w.at({0, 0}) + w.at({0, 2}) == Catch::Approx(1.0));
}

TEST_CASE("gelu is the exact erf form; relu and tanh", "[ch00][values]") {
  // torch.nn.functional.gelu(torch.tensor([-1., 0., 1.], dtype=torch.float64))
  CHECK(max_abs_diff(gelu(f64({-1, 0, 1}, {3})), {-0.15865525393145707, 0.0, 0.8413447460685429}) < 1e-15);
  CHECK(relu(f64({-1, 0, 2}, {3})).to_vector<double>() == std::vector<double>{0, 0, 2});
  CHECK(max_abs_diff(tanh(f64({0.5}, {1})), {0.46211715726000974}) < 1e-15);
}

TEST_CASE("relu keeps one byte an element for backward, not its float input", "[ch00][values]") {
  Generator gen(5);
  Tensor x = randn({64, 1024}, gen);
  x.set_requires_grad(true);
  const Device dev = x.device();
  const auto n = static_cast<std::size_t>(x.numel());
  const std::size_t before = bytes_in_use(dev);
  const Tensor y = relu(neg(x));  // -x is freed unless relu keeps it
  // y, and where -x > 0
  CHECK(bytes_in_use(dev) - before ==
        test::bytes_of({64, 1024}, DType::float32, dev) + test::bytes_of({64, 1024}, DType::boolean, dev));
  const Tensor w = randn({64, 1024}, gen);
  sum(mul(y, w)).backward();  // relu's incoming gradient is w: a row in memory, not sum's broadcast one
  const auto xs = x.to_vector<float>(), ws = w.to_vector<float>(), grad = x.grad().to_vector<float>();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += grad[i] != (xs[i] < 0 ? -ws[i] : 0.0f);
  CHECK(wrong == 0);
}

// x + c, x - c, x * c and x / c take the number c as a kernel argument: their backward needs neither operand.
TEST_CASE("a tensor and a number: backward keeps nothing, and the gradient is right", "[ch00][values]") {
  Tensor x = from_vector(std::vector<double>{1, -2, 3}, {3}, {DType::float32, default_device(), true});
  const Device dev = x.device();
  const std::size_t before = bytes_in_use(dev);
  const Tensor y = ((neg(x) + 2.0) - 0.5) * 3.0 / 4.0;  // each intermediate is freed unless an op keeps it
  CHECK(bytes_in_use(dev) - before == test::bytes_of({3}, DType::float32, dev));
  sum(y).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{-0.75f, -0.75f, -0.75f});
  CHECK(y.to_vector<float>() == std::vector<float>{0.375f, 2.625f, -1.125f});
  const Tensor z = 1.0 - x;
  CHECK(z.to_vector<float>() == std::vector<float>{0.0f, 3.0f, -2.0f});
}

// There is no type promotion: an integer tensor takes a number that is an integer, and refuses any other by name
// (ids * 0.5 would otherwise multiply by a 0-d int64 tensor holding 0, and full or fill_ write 0).
TEST_CASE("an int64 tensor and a number: integers work, any other number is a DTypeError", "[ch00][errors]") {
  const Tensor ids = from_vector(std::vector<std::int64_t>{1, 2, 3}, {3}, {DType::int64, default_device()});
  CHECK(((ids + 2) * 3 - 1).to_vector<std::int64_t>() == std::vector<std::int64_t>{8, 11, 14});
  CHECK((10 - ids).to_vector<std::int64_t>() == std::vector<std::int64_t>{9, 8, 7});
  REQUIRE_THROWS_WITH_ALL(ids * 0.5, DTypeError, "mul", "int64", "[3]", "0.5");
  REQUIRE_THROWS_WITH_ALL(ids + 0.5, DTypeError, "add", "int64", "0.5");
  REQUIRE_THROWS_WITH_ALL(ids - 1e30, DTypeError, "sub", "int64", "1e+30");
  REQUIRE_THROWS_WITH_ALL(0.5 - ids, DTypeError, "sub", "int64", "0.5");
  REQUIRE_THROWS_WITH_ALL(ids / 2.0, DTypeError, "div", "int");
  CHECK(full({2}, -3, {DType::int64, default_device()}).to_vector<std::int64_t>() == std::vector<std::int64_t>{-3, -3});
  REQUIRE_THROWS_WITH_ALL(full({2}, 0.5, {DType::int64, default_device()}), DTypeError, "full", "int64", "0.5");
  Tensor filled = zeros({2}, {DType::int64, default_device()});
  REQUIRE_THROWS_WITH_ALL(fill_(filled, 2.5), DTypeError, "fill_", "int64", "2.5");
  const Tensor first = from_vector(std::vector<double>{1, 0, 0}, {3}, {DType::boolean, default_device()});
  REQUIRE_THROWS_WITH_ALL(masked_fill(ids, first, -0.5), DTypeError, "masked_fill", "int64", "-0.5");
  CHECK(masked_fill(ids, first, -7).to_vector<std::int64_t>() == std::vector<std::int64_t>{-7, 2, 3});
}

TEST_CASE("silu and swiglu: PyTorch's values, finite far below zero", "[ch00][values]") {
  // torch.nn.functional.silu(x) and its gradient, x = [-800, -2, 0, 1.5, 30] (float64; exp(800) overflows)
  Tensor x = f64({-800, -2, 0, 1.5, 30}, {5});
  x.set_requires_grad(true);
  const Tensor y = silu(x);
  CHECK(max_abs_diff(y, {-0.0, -0.2384058440442351, 0.0, 1.2263617142904655, 29.999999999997197}) < 1e-14);
  sum(y).backward();
  CHECK(max_abs_diff(x.grad(), {-0.0, -0.09078424878489547, 0.5, 1.041294154299143, 1.000000000002711}) < 1e-14);
  // swiglu(gate, value) = silu(gate) * value, and shapes must agree
  const Tensor gate = f64({-2, 1.5}, {2}), value = f64({3, -1}, {2});
  CHECK(max_abs_diff(swiglu(gate, value), {-0.2384058440442351 * 3, -1.2263617142904655}) < 1e-14);
  CHECK_THROWS_AS(swiglu(gate, f64({1, 2, 3}, {3})), ShapeError);
}

TEST_CASE("swiglu in float32 is silu then mul, bit for bit, forward and gradients", "[ch12][values]") {
  // The op runs one fused pass (BinaryOp::silu_mul) where the composite runs two; both round silu(gate) to float32
  // before the product, so the bits agree. Rows of 70 reach the vectorised loops and their tails.
  Generator gen(3);
  Tensor gate = uniform({4, 70}, -20, 20, gen), value = uniform({4, 70}, -2, 2, gen);
  const Tensor g = uniform({4, 70}, -1, 1, gen);
  gate.set_requires_grad(true), value.set_requires_grad(true);
  const Tensor fused = swiglu(gate, value);
  fused.backward(g);
  const std::vector<float> fused_gate = gate.grad().to_vector<float>(), fused_value = value.grad().to_vector<float>();
  gate.zero_grad(), value.zero_grad();
  const Tensor composite = silu(gate) * value;
  CHECK(fused.to_vector<float>() == composite.to_vector<float>());
  composite.backward(g);
  CHECK(fused_value == value.grad().to_vector<float>());
  CHECK(fused_gate == gate.grad().to_vector<float>());
}

TEST_CASE("add_rms_norm in float32 is add then rms_norm, bit for bit, forward and gradients", "[ch12][values]") {
  // One pass writes the sum and normalises it; the two ops round the same sum and normalise it with the same row
  // functions, so the bits agree, and the graph is theirs. Rows of 70 reach the vectorised loops and their tails.
  Generator gen(4);
  Tensor x = uniform({2, 3, 70}, -3, 3, gen), r = uniform({2, 3, 70}, -2, 2, gen), w = uniform({70}, 0.5, 1.5, gen);
  const Tensor g_sum = uniform({2, 3, 70}, -1, 1, gen), g_normed = uniform({2, 3, 70}, -1, 1, gen);
  for (Tensor* t : {&x, &r, &w}) t->set_requires_grad(true);
  const auto grads = [&] {
    std::vector<std::vector<float>> out;
    for (Tensor* t : {&x, &r, &w}) out.push_back(t->grad().to_vector<float>()), t->zero_grad();
    return out;
  };
  const SumAndNorm fused = add_rms_norm(x, r, w);
  sum(fused.sum * g_sum + fused.normed * g_normed).backward();
  const auto fused_grads = grads();
  const Tensor h = x + r, normed = rms_norm(h, w);
  CHECK(fused.sum.to_vector<float>() == h.to_vector<float>());
  CHECK(fused.normed.to_vector<float>() == normed.to_vector<float>());
  sum(h * g_sum + normed * g_normed).backward();
  CHECK(fused_grads == grads());
}

TEST_CASE("layer_norm: biased variance, eps inside the sqrt (seed 002's hand-rolled norm differs)", "[ch00][values]") {
  // torch.nn.functional.layer_norm(torch.tensor([[1., 2., 3., 4.]], dtype=torch.float64), (4,))
  const Tensor y = layer_norm(f64({1, 2, 3, 4}, {1, 4}), {}, {});
  CHECK(max_abs_diff(y, {-1.3416354199, -0.4472118066, 0.4472118066, 1.3416354199}) < 1e-9);
  const Tensor ya = layer_norm(f64({1, 2, 3, 4}, {1, 4}), f64({1, 2, 1, 1}, {4}), f64({0, 0, 0, 10}, {4}));
  CHECK(max_abs_diff(ya, {-1.3416354199, -0.8944236132, 0.4472118066, 11.3416354199}) < 1e-9);
}

TEST_CASE("cross_entropy: plain, label smoothing, ignore_index, reductions", "[ch00][values]") {
  const Tensor logits = f64({1, 2, 3, 1, 1, 1}, {2, 3});
  auto t = [](std::vector<std::int64_t> v) { return from_vector(v, {2}, {DType::int64}); };
  // torch.nn.functional.cross_entropy(logits, torch.tensor([2, 0]))
  const double row0 = 0.40760596444437555, row1 = 1.0986122886681098;
  CHECK(cross_entropy(logits, t({2, 0})).item() == Catch::Approx((row0 + row1) / 2).epsilon(1e-14));
  CHECK(cross_entropy(logits, t({2, -100})).item() == Catch::Approx(row0).epsilon(1e-13));  // mean over 1
  CHECK(cross_entropy(logits, t({2, 7}), 7).item() == Catch::Approx(row0).epsilon(1e-13));
  CHECK(cross_entropy(logits, t({2, 0}), -100, 0.0, Reduction::sum).item() == Catch::Approx(row0 + row1));
  CHECK(max_abs_diff(cross_entropy(logits, t({2, 0}), -100, 0.0, Reduction::none), {row0, row1}) < 1e-14);
  // label_smoothing=0.1: 0.9 * nll + 0.1 * mean_c(-log p_c); row 1 is uniform, so unchanged.
  CHECK(cross_entropy(logits, t({2, 0}), -100, 0.1, Reduction::none).at({0}) ==
        Catch::Approx(0.9 * row0 + 0.1 * 1.4076059644443755).epsilon(1e-14));
}

TEST_CASE("matmul values, including batched and broadcast", "[ch00][values]") {
  const Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = f64({1, 0, 0, 1, 1, 1}, {3, 2});
  CHECK(matmul(a, b).to_vector<double>() == std::vector<double>{4, 5, 10, 11});
  CHECK(matmul(transpose(b, 0, 1), transpose(a, 0, 1)).to_vector<double>() == std::vector<double>{4, 10, 5, 11});
  const Tensor batch = stack({a, a * 2.0}, 0);  // [2, 2, 3]
  CHECK(matmul(batch, b).to_vector<double>() == std::vector<double>{4, 5, 10, 11, 8, 10, 20, 22});
  CHECK(matmul(f64({1, 1, 1}, {3}), b).to_vector<double>() == std::vector<double>{2, 2});
}

TEST_CASE("max shares the gradient among ties (torch.amax)", "[ch00][values]") {
  Tensor x = f64({1, 3, 3, 2}, {4}).set_requires_grad();
  Tensor m = max(x);
  CHECK(m.item() == 3.0);
  m.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0.5, 0.5, 0});
  CHECK(max(f64({1, 5, 3, 2}, {2, 2}), {1}, true).to_vector<double>() == std::vector<double>{5, 3});
}

TEST_CASE("sum and mean over dims with keepdim", "[ch00][values]") {
  const Tensor x = arange(24, {DType::float64});
  const Tensor c = view(x, {2, 3, 4});
  CHECK(sum(c, {1}).shape() == Shape{2, 4});
  CHECK(sum(c, {1}, true).shape() == Shape{2, 1, 4});
  CHECK(sum(c, {0, 2}).to_vector<double>() == std::vector<double>{60, 92, 124});
  CHECK(mean(c).item() == 11.5);
  CHECK(std::isnan(mean(zeros({0, 3})).item()));  // torch.mean of nothing is nan
  CHECK(mean(zeros({0, 3}), {0}).shape() == Shape{3});
  CHECK(sum(c).dim() == 0);
  CHECK(sum_to(ones({2, 3, 4}), {3, 1}).to_vector<double>() == std::vector<double>{8, 8, 8});
}

TEST_CASE("reductions: leading, trailing and strided paths agree, max propagates NaN", "[ch00][values]") {
  // [5, 600, 3] reduced over its leading dims takes the column path (600 * 3 > one 512-column chunk),
  // over its trailing dims the row path; the same data transposed takes the strided path.
  const Tensor x = test::f64_input({5, 600, 3}, 11, -10, 10);
  const Tensor xt = permute(contiguous(permute(x, {2, 1, 0})), {2, 1, 0});  // same values, other strides
  REQUIRE(!xt.is_contiguous());
  for (const auto& dims : std::vector<std::vector<std::int64_t>>{{0}, {0, 1}, {2}, {1, 2}, {1}}) {
    CHECK(sum(x, dims).to_vector<double>() == sum(xt, dims).to_vector<double>());
    CHECK(max(x, dims).to_vector<double>() == max(xt, dims).to_vector<double>());
  }
  // Column sums by hand.
  const auto v = x.to_vector<double>();
  double col = 0;
  for (int i = 0; i < 5; ++i) col += v[static_cast<std::size_t>(i * 1800 + 7)];
  CHECK(sum(x, {0}).to_vector<double>()[7] == col);
  auto raw = x.to_vector<double>();
  raw[1800 + 7] = NAN;  // element [1, 2, 1]
  const Tensor y = from_vector(raw, x.shape(), {DType::float64});
  const auto m = max(y, {0}).to_vector<double>();
  CHECK(std::isnan(m[7]));
  CHECK(!std::isnan(m[8]));
  CHECK(std::isnan(max(y, {1, 2}).to_vector<double>()[1]));
}

TEST_CASE("sums longer than one block: every path, and 1 or 2 threads, give the same bits", "[ch00][values]") {
  // 12,000 terms per sum: three blocks of 4,096, eight lanes each (autograd/backends/cpu/reduce.cpp). Random
  // doubles make a sum's last bits depend on its order, so a path adding in any other order differs here.
  const Tensor x = test::f64_input({12000, 3}, 12, -10, 10);
  const Tensor xt = permute(contiguous(permute(x, {1, 0})), {1, 0});  // strided: each walk takes the slow path
  const Tensor rows = contiguous(permute(x, {1, 0}));                 // [3, 12000]: one dense run per row
  double exact = 0;
  for (const double v : x.to_vector<double>()) exact += v;
  const int before = omp_get_max_threads();
  std::vector<std::vector<double>> seen;
  for (const int threads : {1, 2}) {
    omp_set_num_threads(threads);
    const double all = sum(x).item();  // one number: threads take blocks when there are two
    CHECK(all == Catch::Approx(exact).epsilon(1e-12));
    CHECK(all == sum(xt).item());
    const auto columns = sum(x, {0}).to_vector<double>();  // [12000, 3] over its leading dim
    CHECK(columns == sum(xt, {0}).to_vector<double>());
    CHECK(columns == sum(rows, {1}).to_vector<double>());
    seen.push_back(columns);
    seen.back().push_back(all);
    // [3, 5000, 2, 37] over its middle dims (grouped-query attention's repeated heads): a run of 10,000 terms
    // between kept dims, each of the 3 blocks' 37 columns summed in place (37: vector lanes and a remainder);
    // the strided walk is the order.
    const Tensor middle = test::f64_input({3, 5000, 2, 37}, 13, -10, 10);
    const Tensor middle_t = permute(contiguous(permute(middle, {3, 2, 1, 0})), {3, 2, 1, 0});
    const auto run = sum(middle, {1, 2}, true).to_vector<double>();
    CHECK(run == sum(middle_t, {1, 2}, true).to_vector<double>());
    seen.back().insert(seen.back().end(), run.begin(), run.end());
  }
  omp_set_num_threads(before);
  CHECK(seen[0] == seen[1]);
}

TEST_CASE("embedding: lookup, repeated ids accumulate, padding row gets no gradient", "[ch00][values]") {
  Tensor w = f64({0, 1, 10, 11, 20, 21}, {3, 2}).set_requires_grad();
  const Tensor ids = from_vector(std::vector<std::int64_t>{2, 0, 2, 1}, {2, 2}, {DType::int64});
  const Tensor e = embedding(w, ids, 1);
  CHECK(e.shape() == Shape{2, 2, 2});
  CHECK(e.to_vector<double>() == std::vector<double>{20, 21, 0, 1, 20, 21, 10, 11});
  sum(e).backward();
  CHECK(w.grad().to_vector<double>() == std::vector<double>{1, 1, 0, 0, 2, 2});
}

TEST_CASE("adam_update_ matches one step of torch.optim.Adam and AdamW", "[ch00][values]") {
  NoGradGuard no_grad;
  AdamConfig cfg;
  cfg.lr = 0.1;
  Tensor p = f64({1.0, -1.0}, {2}), g = f64({0.5, -2.0}, {2});
  Tensor m = zeros({2}, {DType::float64}), v = zeros({2}, {DType::float64});
  adam_update_(p, g, m, v, cfg);  // first step: p - lr * g / (|g| + eps)
  CHECK(max_abs_diff(p, {1.0 - 0.1 * 0.5 / (0.5 + 1e-8), -1.0 + 0.1 * 2.0 / (2.0 + 1e-8)}) < 1e-15);
  CHECK(max_abs_diff(m, {0.05, -0.2}) < 1e-15);
  CHECK(max_abs_diff(v, {0.00025, 0.004}) < 1e-15);

  cfg.decoupled = true;
  cfg.weight_decay = 0.1;
  Tensor q = f64({1.0}, {1}), gq = f64({0.5}, {1});
  Tensor mq = zeros({1}, {DType::float64}), vq = zeros({1}, {DType::float64});
  adam_update_(q, gq, mq, vq, cfg);  // AdamW: q * (1 - lr * wd) - lr * ...
  CHECK(q.item() == Catch::Approx(1.0 * (1 - 0.01) - 0.1 * 0.5 / (0.5 + 1e-8)).epsilon(1e-15));
}

// An optimizer's step over many parameters at once (Backend::adam_update_many; on CUDA a launch per 16): the same
// bits as one adam_update_ each. 37 parameters (three launches' worth) of sizes 0 to 4000, float32 and float64
// mixed (one group per dtype), AdamW at step 3.
TEST_CASE("adam_update_ over many parameters gives the bits of one adam_update_ each", "[ch00][values]") {
  NoGradGuard no_grad;
  AdamConfig cfg;
  cfg.lr = 0.01, cfg.weight_decay = 0.1, cfg.decoupled = true, cfg.step = 3;
  Generator gen(5);
  std::vector<Tensor> p, g, m, v, p1, m1, v1;
  for (int i = 0; i < 37; ++i) {
    const DType dt = i % 3 == 2 ? DType::float64 : DType::float32;
    const std::int64_t n = (i * 397) % 4001;
    const auto draw = [&](double low) { return uniform({n}, low, 1.0, gen, {dt}); };
    p.push_back(draw(-1)), g.push_back(draw(-1)), m.push_back(draw(-1) * 0.1), v.push_back(draw(0) * 0.01);
    p1.push_back(contiguous(p.back() * 1.0)), m1.push_back(contiguous(m.back() * 1.0));
    v1.push_back(contiguous(v.back() * 1.0));
  }
  adam_update_(p, g, m, v, cfg);
  for (std::size_t i = 0; i < p.size(); ++i) {
    adam_update_(p1[i], g[i], m1[i], v1[i], cfg);
    INFO("parameter " << i << ", " << p[i].numel() << " values");
    CHECK(close(p[i], p1[i], 0, 0));
    CHECK(close(m[i], m1[i], 0, 0));
    CHECK(close(v[i], v1[i], 0, 0));
  }
  std::vector<Tensor> short_list(p.begin(), p.begin() + 2);
  REQUIRE_THROWS_WITH_ALL(adam_update_(short_list, g, m, v, cfg), ValueError, "2 params, 37 grads");
}

// clip_grad_norm_'s scaling (Backend::scale_many; on CUDA a launch per 16 tensors): the bits of mul_ on each, and
// each tensor's version bumped as mul_ bumps it (a backward that saved one would otherwise read it changed unseen).
TEST_CASE("mul_ over many tensors gives the bits of mul_ on each and bumps each version", "[ch00][values]") {
  const NoGradGuard no_grad;
  Generator gen(7);
  std::vector<Tensor> many, one_by_one;
  for (int i = 0; i < 19; ++i) {
    many.push_back(uniform({(i * 613) % 5000}, -2, 2, gen));
    one_by_one.push_back(contiguous(many.back() * 1.0));
  }
  const Tensor factor = uniform({1}, 0, 1, gen);
  const std::uint64_t version = many[7].version();
  mul_(many, factor);
  for (std::size_t i = 0; i < many.size(); ++i) {
    mul_(one_by_one[i], factor);
    CHECK(close(many[i], one_by_one[i], 0, 0));
  }
  CHECK(many[7].version() == version + 1);
  std::vector<Tensor> two{zeros({2}), zeros({2})};
  REQUIRE_THROWS_WITH_ALL(mul_(two, ones({2})), ShapeError, "mul_", "one value");
}

// clip_grad_norm_'s sums (Backend::sum_squares_many; on CUDA two launches per 16 tensors): each tensor's sum(x * x)
// in float64, also for an empty tensor, tensors of mixed dtypes (summed one by one) and a view.
TEST_CASE("sum_of_squares gives each tensor's sum of squares", "[ch00][values]") {
  const Tensor a = from_vector(std::vector<double>{3, 4}, {2});
  const Tensor b = from_vector(std::vector<double>{1, 2, 2, 0}, {2, 2}, {DType::float64});
  const Tensor squares = sum_of_squares({a, zeros({0}), transpose(b, 0, 1), narrow(a, 0, 1, 1)});
  CHECK(squares.dtype() == DType::float64);
  CHECK(squares.to_vector<double>() == std::vector<double>{25, 0, 9, 16});
  Generator gen(6);
  std::vector<Tensor> many;
  for (int i = 0; i < 19; ++i) many.push_back(uniform({(i * 613) % 5000}, -2, 2, gen));
  const std::vector<double> sums = sum_of_squares(many).to_vector<double>();
  for (std::size_t i = 0; i < many.size(); ++i)
    CHECK(sums[i] == Catch::Approx(sum(many[i] * many[i]).item()).epsilon(1e-6));
  REQUIRE_THROWS_WITH_ALL(sum_of_squares({}), ValueError, "sum_of_squares", "at least one");
  REQUIRE_THROWS_AS(sum_of_squares({ones({2}, {DType::int64})}), DTypeError);
}

// A token's keys written into a KV cache at a position the host does not read (Backend::write_rows).
TEST_CASE("index_copy_ writes source's slices at the index along a dim, the last of a repeated index",
          "[ch00][values]") {
  const auto index = [](std::vector<std::int64_t> v) {
    const auto n = static_cast<std::int64_t>(v.size());
    return from_vector(v, {n}, {DType::int64});
  };
  const Tensor src = reshape(arange(0, 12, 1, {DType::float32}), {2, 2, 3});
  // x = torch.zeros(2, 4, 3); x.index_copy_(1, torch.tensor([3, 0]), torch.arange(12.).reshape(2, 2, 3))
  Tensor x = zeros({2, 4, 3});
  const std::uint64_t version = x.version();
  index_copy_(x, 1, index({3, 0}), src);
  CHECK(x.to_vector<double>() ==
        std::vector<double>{3, 4, 5, 0, 0, 0, 0, 0, 0, 0, 1, 2, 9, 10, 11, 0, 0, 0, 0, 0, 0, 6, 7, 8});
  CHECK(x.version() == version + 1);
  // A repeated index keeps its last slice; a one-value index; a strided destination (a view into a larger tensor).
  Tensor y = zeros({2, 4, 3});
  index_copy_(y, -2, index({1, 1}), src);
  CHECK(y.to_vector<double>() ==
        std::vector<double>{0, 0, 0, 3, 4, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 10, 11, 0, 0, 0, 0, 0, 0});
  Tensor big = zeros({2, 6, 3});
  Tensor window = narrow(big, 1, 1, 4);
  index_copy_(window, 1, full({1}, 2, {DType::int64}), narrow(src, 1, 1, 1));
  CHECK(big.to_vector<double>() == std::vector<double>{0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 4,  5,  0, 0, 0, 0, 0, 0,
                                                       0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 10, 11, 0, 0, 0, 0, 0, 0});
  // A bad index: at once on a CPU, at the next copy from a GPU; its slices are not written.
  REQUIRE_THROWS_WITH_ALL(
      [&] {
        index_copy_(x, 1, index({0, 7}), src);
        return x.to_vector<double>();
      }(),
      IndexError, "index_copy_", "index 7 at position 1", "dim 1 of size 4");
  REQUIRE_THROWS_WITH_ALL(index_copy_(x, 1, index({0}), src), ShapeError, "index_copy_", "source must be [2, 1, 3]");
  REQUIRE_THROWS_WITH_ALL(index_copy_(x, 1, reshape(index({0, 1}), {1, 2}), src), ShapeError, "index_copy_");
  REQUIRE_THROWS_WITH_ALL(index_copy_(x, 1, index({0, 1}), src.to(DType::float64)), DTypeError, "index_copy_",
                          "float64");
  REQUIRE_THROWS_WITH_ALL(index_copy_(x, 3, index({0, 1}), src), DimError, "index_copy_");
  REQUIRE_THROWS_AS(index_copy_(x, 1, index({0, 1}).to(DType::float32), src), DTypeError);
  Tensor w = zeros({2, 4, 3}, {DType::float32, default_device(), true});
  REQUIRE_THROWS_WITH_ALL(index_copy_(w, 1, index({0, 1}), src), AutogradError, "index_copy_");
}

TEST_CASE("in-place helpers: fill_, copy_ with broadcast and cast, add_, mul_", "[ch00][values]") {
  Tensor a = zeros({2, 3});
  copy_(a, f64({1, 2, 3}, {3}));
  CHECK(a.to_vector<double>() == std::vector<double>{1, 2, 3, 1, 2, 3});
  add_(a, ones({2, 3}), 2.0);
  CHECK(a.to_vector<double>() == std::vector<double>{3, 4, 5, 3, 4, 5});
  Tensor col = narrow(a, 1, 0, 1);
  fill_(col, -1.0);
  CHECK(a.to_vector<double>() == std::vector<double>{-1, 4, 5, -1, 4, 5});
  // mul_ writes its output over its first operand: a 0-dim factor, then a row broadcast over a strided view.
  mul_(a, scalar(-2.0));
  CHECK(a.to_vector<double>() == std::vector<double>{2, -8, -10, 2, -8, -10});
  Tensor right = narrow(a, 1, 1, 2);
  mul_(right, f64({10, 100}, {2}).to(a.dtype()));
  CHECK(a.to_vector<double>() == std::vector<double>{2, -80, -1000, 2, -80, -1000});
  REQUIRE_THROWS_WITH_ALL(mul_(a, ones({4})), ShapeError, "mul_", "[4]", "[2, 3]");
  Tensor e = expand(zeros({1}), {3});
  REQUIRE_THROWS_WITH_ALL(fill_(e, 1.0), ValueError, "expanded");
  REQUIRE_THROWS_WITH_ALL(mul_(e, ones({3})), ValueError, "mul_", "expanded");
}
