// Every differentiable op, checked against central finite differences in float64, on plain,
// broadcast and non-contiguous (transposed, sliced, expanded) inputs.
#include <cmath>
#include <functional>
#include <set>

#include "../helpers.h"

using namespace stepformer;
using stepformer::test::f64_input;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Case {
  std::string op;  // the op-table name the case exercises (checked in its graph)
  std::string variant;
  std::vector<Shape> shapes;
  Fn f;
  double low = -1.0, high = 1.0;  // input range (positive for log, sqrt, ...)
};

Tensor bool_pattern(const Shape& shape) {  // a fixed mask: true where the flat index % 3 == 0
  std::vector<double> v(static_cast<std::size_t>(numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = i % 3 == 0;
  return from_vector(v, shape, {DType::boolean});
}

// cos or sin of the angles (t + 1) (i + 1) / 3 as a [T, pairs] table on like's device: constants, no gradient.
Tensor angle_table(const Tensor& like, std::int64_t T, std::int64_t pairs, bool sine) {
  std::vector<double> v;
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < pairs; ++i) {
      const double angle = static_cast<double>((t + 1) * (i + 1)) / 3.0;
      v.push_back(sine ? std::sin(angle) : std::cos(angle));
    }
  return from_vector(v, {T, pairs}, {like.dtype(), like.device()});
}

Tensor ids(const std::vector<std::int64_t>& v, const Shape& shape) { return from_vector(v, shape, {DType::int64}); }

// Another device than the one the suite runs on (the CPU, or cuda-sim when the suite runs on the CPU).
Device other_device() { return default_device() == kCPU ? Device{DeviceType::cuda_sim, 0} : kCPU; }

std::vector<Case> cases() {
  auto T = [](const Tensor& t) { return transpose(t, 0, 1); };
  return {
      {"to_device", "there and back", {{2, 3}}, [](auto& x) { return exp(x[0].to(other_device())).to(x[0].device()); }},
      {"add", "same shape", {{3, 4}, {3, 4}}, [](auto& x) { return x[0] + x[1]; }},
      {"add", "broadcast [3,1]+[1,4]", {{3, 1}, {1, 4}}, [](auto& x) { return x[0] + x[1]; }},
      {"add", "broadcast [2,3,4]+[4]", {{2, 3, 4}, {4}}, [](auto& x) { return x[0] + x[1]; }},
      {"add", "transposed + sliced", {{4, 3}, {3, 8}}, [T](auto& x) { return T(x[0]) + slice(x[1], 1, 0, 8, 2); }},
      {"sub", "broadcast", {{2, 3}, {3}}, [](auto& x) { return x[0] - x[1]; }},
      {"mul", "broadcast", {{2, 3}, {2, 1}}, [](auto& x) { return x[0] * x[1]; }},
      {"mul",
       "expanded",
       {{1, 3}, {4, 3}},
       [](auto& x) {
         return expand(x[0], {4, 3}) * x[1];
       }},
      {"mul", "same tensor twice", {{5}}, [](auto& x) { return x[0] * x[0]; }},
      {"scale", "a number times a transposed view", {{3, 2}}, [T](auto& x) { return -1.5 * T(x[0]); }},
      {"add_scalar",
       "numbers added to and taken from a transposed view, and it from a number",
       {{3, 2}},
       [T](auto& x) { return 0.25 - (T(x[0]) + 1.5 - 0.5); }},
      {"div_scalar", "a transposed view over a number", {{3, 2}}, [T](auto& x) { return T(x[0]) / -1.5; }},
      {"div", "broadcast", {{2, 3}, {3}}, [](auto& x) { return x[0] / x[1]; }, 0.5, 2.0},
      {"div", "transposed", {{3, 2}, {2, 3}}, [T](auto& x) { return T(x[0]) / x[1]; }, 0.5, 2.0},
      {"neg", "plain", {{2, 3}}, [](auto& x) { return -x[0]; }},
      {"pow", "p=3", {{2, 3}}, [](auto& x) { return pow(x[0], 3.0); }},
      {"pow", "p=-0.5", {{2, 3}}, [](auto& x) { return pow(x[0], -0.5); }, 0.5, 2.0},
      {"exp", "transposed", {{2, 3}}, [T](auto& x) { return exp(T(x[0])); }},
      {"log", "plain", {{2, 3}}, [](auto& x) { return log(x[0]); }, 0.5, 2.0},
      {"sqrt", "plain", {{2, 3}}, [](auto& x) { return sqrt(x[0]); }, 0.5, 2.0},
      {"rsqrt", "plain", {{2, 3}}, [](auto& x) { return rsqrt(x[0]); }, 0.5, 2.0},
      {"tanh", "plain", {{2, 3}}, [](auto& x) { return tanh(x[0]); }},
      {"relu", "plain", {{3, 4}}, [](auto& x) { return relu(x[0]); }},
      {"gelu", "plain", {{3, 4}}, [](auto& x) { return gelu(x[0]); }, -3.0, 3.0},
      {"silu", "plain", {{3, 4}}, [](auto& x) { return silu(x[0]); }, -4.0, 4.0},
      {"swiglu", "transposed gate", {{4, 3}, {3, 4}}, [T](auto& x) { return swiglu(T(x[0]), x[1]); }, -3.0, 3.0},
      {"where",
       "broadcast",
       {{2, 3}, {3}},
       [](auto& x) {
         return where(bool_pattern({2, 3}), x[0], x[1]);
       }},
      {"where",
       "masked_fill",
       {{3, 4}},
       [](auto& x) {
         return masked_fill(x[0], bool_pattern({1, 4}), -5.0);
       }},
      {"sum", "all", {{2, 3}}, [](auto& x) { return sum(x[0]); }},
      {"sum", "dim 1 keepdim", {{2, 3, 4}}, [](auto& x) { return sum(x[0], {1}, true); }},
      {"sum",
       "dims 0,-1 transposed",
       {{3, 2, 4}},
       [](auto& x) {
         return sum(transpose(x[0], 0, 2), {0, -1});
       }},
      {"mean", "dim -1", {{2, 3}}, [](auto& x) { return mean(x[0], {-1}); }},
      {"mean", "all", {{2, 3}}, [](auto& x) { return mean(x[0]); }},
      {"max", "dim 1", {{3, 4}}, [](auto& x) { return max(x[0], {1}); }},
      {"max", "all, sliced", {{3, 4}}, [](auto& x) { return max(slice(x[0], 1, 1, 4)); }},
      {"view",
       "view",
       {{2, 6}},
       [](auto& x) {
         return view(x[0], {3, 4}) * 1.0;
       }},
      {"view",
       "reshape of transposed (copies)",
       {{2, 6}},
       [T](auto& x) {
         return reshape(T(x[0]), {3, 4}) * 1.0;
       }},
      {"view", "squeeze/unsqueeze", {{2, 1, 3}}, [](auto& x) { return unsqueeze(squeeze(x[0], 1), 0) * 1.0; }},
      {"permute",
       "3-D",
       {{2, 3, 4}},
       [](auto& x) {
         return permute(x[0], {2, 0, 1}) * 1.0;
       }},
      {"narrow", "narrow", {{4, 5}}, [](auto& x) { return narrow(x[0], 1, 1, 3) * 1.0; }},
      {"narrow", "slice with step", {{7, 2}}, [](auto& x) { return slice(x[0], 0, 1, 7, 3) * 1.0; }},
      {"expand",
       "expand",
       {{3, 1}},
       [](auto& x) {
         return expand(x[0], {2, 3, 4}) * 1.0;
       }},
      {"contiguous", "of transposed", {{3, 4}}, [T](auto& x) { return contiguous(T(x[0])) * 1.0; }},
      {"cat",
       "dim 1, three inputs",
       {{2, 1}, {2, 3}, {2, 2}},
       [](auto& x) {
         return cat({x[0], x[1], x[2]}, 1);
       }},
      {"cat",
       "stack",
       {{2, 3}, {2, 3}},
       [](auto& x) {
         return stack({x[0], x[1]}, 1);
       }},
      {"matmul", "2-D", {{3, 4}, {4, 5}}, [](auto& x) { return matmul(x[0], x[1]); }},
      {"matmul", "batched", {{2, 3, 4}, {2, 4, 5}}, [](auto& x) { return matmul(x[0], x[1]); }},
      {"matmul", "broadcast batch", {{2, 1, 3, 4}, {3, 4, 2}}, [](auto& x) { return matmul(x[0], x[1]); }},
      {"matmul", "transposed operands", {{4, 3}, {5, 4}}, [T](auto& x) { return matmul(T(x[0]), T(x[1])); }},
      {"matmul", "matrix @ vector", {{3, 4}, {4}}, [](auto& x) { return matmul(x[0], x[1]); }},
      {"matmul", "vector @ batched", {{4}, {2, 4, 3}}, [](auto& x) { return matmul(x[0], x[1]); }},
      {"softmax", "last dim", {{3, 5}}, [](auto& x) { return softmax(x[0]); }},
      {"softmax", "dim 0, transposed", {{4, 3}}, [T](auto& x) { return softmax(T(x[0]), 0); }},
      {"log_softmax", "last dim", {{3, 5}}, [](auto& x) { return log_softmax(x[0]); }},
      {"log_softmax", "dim 1 of 3-D", {{2, 3, 4}}, [](auto& x) { return log_softmax(x[0], 1); }},
      {"layer_norm", "affine", {{3, 5}, {5}, {5}}, [](auto& x) { return layer_norm(x[0], x[1], x[2]); }},
      {"layer_norm", "no affine, transposed", {{5, 3}}, [T](auto& x) { return layer_norm(T(x[0]), {}, {}); }},
      {"rms_norm", "gain", {{3, 5}, {5}}, [](auto& x) { return rms_norm(x[0], x[1]); }},
      {"rms_norm", "no gain, transposed", {{5, 3}}, [T](auto& x) { return rms_norm(T(x[0]), {}); }},
      {"rms_norm",
       "add_rms_norm (an add node, then rms_norm's), the sum and the norm both used, gain",
       {{3, 5}, {3, 5}, {5}},
       [](auto& x) {
         const SumAndNorm out = add_rms_norm(x[0], x[1], x[2]);
         return out.sum * out.normed;
       }},
      {"rms_norm",
       "add_rms_norm, no gain, a transposed residual",
       {{3, 5}, {5, 3}},
       [T](auto& x) { return add_rms_norm(x[0], T(x[1]), {}).normed; }},
      {"rotate_pairs",
       "half, heads a permuted view",
       {{2, 3, 4, 6}},
       [](auto& x) {
         const Tensor h = transpose(x[0], 1, 2);  // [2, 4, 3, 6], last stride 1: read in place
         return rotate_pairs(h, angle_table(x[0], 3, 3, false), angle_table(x[0], 3, 3, true), RopePairing::half);
       }},
      {"rotate_pairs",
       "adjacent, transposed (copied first)",
       {{6, 4}},
       [T](auto& x) {
         return rotate_pairs(T(x[0]), angle_table(x[0], 4, 3, false), angle_table(x[0], 4, 3, true),
                             RopePairing::adjacent);
       }},
      {"embedding",
       "repeated ids",
       {{5, 3}},
       [](auto& x) {
         return embedding(x[0], ids({1, 4, 1, 0, 1, 2}, {2, 3}));
       }},
      {"embedding",
       "padding_idx",
       {{5, 3}},
       [](auto& x) {
         return embedding(x[0], ids({3, 2, 4, 3}, {4}), 0);
       }},  // padding row: see test_values
      {"dropout",
       "p=0.4",
       {{4, 6}},
       [](auto& x) {
         Generator g(7);
         return dropout(x[0], 0.4, true, g);
       }},
      {"cross_entropy",
       "mean",
       {{4, 5}},
       [](auto& x) {
         return cross_entropy(x[0], ids({0, 3, 4, 1}, {4}));
       }},
      {"cross_entropy",
       "ignore_index + smoothing, 3-D",
       {{2, 3, 5}},
       [](auto& x) {
         return cross_entropy(x[0], ids({0, 3, -100, 1, 4, -100}, {2, 3}), -100, 0.1);
       }},
      {"cross_entropy",
       "sum",
       {{3, 4}},
       [](auto& x) {
         return cross_entropy(x[0], ids({0, 3, 1}, {3}), -100, 0.0, Reduction::sum);
       }},
      {"flash_attention",
       "pad mask, Tq 3 != Tk 5, Dh 2 != Dv 3",
       {{1, 2, 3, 2}, {1, 2, 5, 2}, {1, 2, 5, 3}},
       [](auto& x) {
         const Tensor pad =
             from_vector(std::vector<double>{0, 0, 0, 1, 1}, {1, 1, 1, 5}, {DType::boolean, x[0].device()});
         return flash_attention(x[0], x[1], x[2], pad, 0.7);
       }},
      {"flash_attention",
       "causal, dropout 0.3",
       {{2, 1, 4, 3}, {2, 1, 4, 3}, {2, 1, 4, 3}},
       [](auto& x) {
         Generator g(7);
         return flash_attention(x[0], x[1], x[2], {}, 0.5, true, 0.3, true, g);
       }},
      {"cross_entropy",
       "none, transposed",
       {{4, 3}},
       [T](auto& x) {
         return cross_entropy(T(x[0]), ids({0, 3, 1}, {3}), -100, 0.2, Reduction::none);
       }},
  };
}

std::set<std::string> ops_in_graph(const Tensor& root) {
  std::set<std::string> names;
  std::vector<const Node*> todo{root.grad_fn().get()};
  std::set<const Node*> seen;
  while (!todo.empty()) {
    const Node* n = todo.back();
    todo.pop_back();
    if (!n || !seen.insert(n).second || n->is_accumulator()) continue;
    names.insert(op_info(n->op).name);
    for (const Edge& e : n->edges) todo.push_back(e.to.get());  // null entries are skipped above
  }
  return names;
}

// A leaf whose elements are not adjacent in memory: every other element of a buffer twice as long in
// the last dim. Every op must give the same gradients for it as for a contiguous leaf.
Tensor strided_input(const Shape& shape, std::uint64_t seed, double low, double high) {
  if (shape.empty()) return f64_input(shape, seed, low, high);
  Shape wide = shape;
  wide.back() *= 2;
  const Tensor buffer = f64_input(wide, seed, low, high).detach();
  return slice(buffer, -1, 0, wide.back(), 2).detach().set_requires_grad();
}

}  // namespace

TEST_CASE("gradcheck: every op against finite differences", "[ch00][gradcheck]") {
  std::uint64_t seed = 1;
  for (const Case& c : cases()) {
    for (const bool strided : {false, true}) {
      DYNAMIC_SECTION(c.op << ": " << c.variant << (strided ? " (strided leaves)" : "")) {
        std::vector<Tensor> inputs;
        for (const Shape& s : c.shapes)
          inputs.push_back(strided ? strided_input(s, seed++, c.low, c.high) : f64_input(s, seed++, c.low, c.high));
        if (strided)
          for (const Tensor& x : inputs) REQUIRE((x.numel() <= 1 || !x.is_contiguous()));
        const auto used = ops_in_graph(c.f(inputs));
        INFO("ops in the graph: " << Catch::Detail::stringify(std::vector<std::string>(used.begin(), used.end())));
        CHECK(used.count(c.op) == 1);
        const GradcheckResult r = gradcheck(c.f, inputs);
        INFO(r.report);
        CHECK(r.ok);
      }
    }
  }
}

TEST_CASE("gradcheck: every op of the op table has a case", "[ch00][gradcheck]") {
  std::set<std::string> covered;
  for (const Case& c : cases()) covered.insert(c.op);
  for (const OpInfo& op : all_ops()) {
    if (std::string(op.name) == "to_dtype") continue;  // float64 -> float32 -> float64 loses the digits
    INFO("op without a gradcheck case: " << op.name);  // finite differences need; see test_engine.cpp
    CHECK(covered.count(op.name) == 1);
  }
}

TEST_CASE("gradcheck reports the worst element when a gradient is wrong", "[ch00][gradcheck]") {
  // A deliberately wrong backward: y = x * x, but built so that the tape sees only one factor.
  const Fn wrong = [](const std::vector<Tensor>& x) { return x[0] * x[0].detach(); };
  const Tensor a = f64_input({2, 2}, 99);
  const GradcheckResult r = gradcheck(wrong, {a});
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.report, Catch::Matchers::ContainsSubstring("analytic"));
  CHECK_THAT(r.report, Catch::Matchers::ContainsSubstring("numeric"));
  CHECK_THAT(r.report, Catch::Matchers::ContainsSubstring("element ["));
}

TEST_CASE("gradcheck refuses float32 inputs", "[ch00][gradcheck][errors]") {
  const Tensor a = ones({2}, {DType::float32, kCPU, true});
  REQUIRE_THROWS_WITH_ALL(gradcheck([](auto& x) { return x[0] * 2.0; }, {a}), DTypeError, "gradcheck", "float64");
}
