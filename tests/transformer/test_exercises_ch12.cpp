// Chapter 12. The graded tests of chapter 12's exercises (docs/exercises.md): test [ex12.M] grades exercise 12.M,
// against values computed another way (plain loops in double), forward only except 12.1's and 12.3's backward. Where a
// result equals what a known mistake computes, the message names that mistake.
#include <cmath>

#include "../../autograd/backends/sampling_math.h"  // exercise 12.5's nucleus_size, written once for every backend
#include "../helpers.h"
#include "autograd/grad_mode.h"
#include "transformer/grouped_attention.h"
#include "transformer/rms_norm.h"
#include "transformer/sampling.h"

using namespace stepformer;
using namespace stepformer::transformer;
using stepformer::test::close;
using stepformer::test::max_abs_diff;
using stepformer::test::mistake;

namespace {
double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = a.size() == b.size() ? 0.0 : INFINITY;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}
// Applies f(row) to every row of the last dim of x [R, D].
template <class F>
std::vector<double> by_row(const std::vector<double>& x, std::size_t D, F f) {
  std::vector<double> out;
  for (std::size_t r = 0; r < x.size() / D; ++r) {
    const auto y = f(std::vector<double>(x.begin() + static_cast<std::ptrdiff_t>(r * D),
                                         x.begin() + static_cast<std::ptrdiff_t>((r + 1) * D)));
    out.insert(out.end(), y.begin(), y.end());
  }
  return out;
}
}  // namespace

TEST_CASE("ex12.1: RMSNorm: rstd = 1 / sqrt(mean(x^2) + eps), y = x rstd g, and its backward", "[ex12.1]") {
  RMSNorm norm(4);
  {
    const NoGradGuard no_grad;
    copy_(norm.weight, from_vector(std::vector<double>{1, -2, 0.5, 3}, {4}));
  }
  const std::vector<double> g{1, -2, 0.5, 3};
  // Rows of size ~1e-3: mean(x^2) ~ 1e-6 is below eps = 1e-5, so where eps sits shows.
  for (const double scale : {1.0, 1e-3}) {
    const std::vector<double> x{1 * scale, 2 * scale, -3 * scale, 0.5 * scale, 4 * scale, 4 * scale, 1 * scale, 0};
    const auto got = norm(from_vector(x, {2, 4})).to_vector<double>();  // float32, as the weight
    enum class Slip { none, eps_outside, sum_not_mean };
    const auto rms_norm_of = [&](Slip slip) {
      return by_row(x, 4, [&](std::vector<double> row) {
        double squares = 0;
        for (double v : row) squares += v * v;
        const double ms = slip == Slip::sum_not_mean ? squares : squares / 4;
        const double denominator = slip == Slip::eps_outside ? std::sqrt(ms) + 1e-5 : std::sqrt(ms + 1e-5);
        for (std::size_t i = 0; i < 4; ++i) row[i] = row[i] / denominator * g[i];
        return row;
      });
    };
    const double tol = 1e-5 * std::max(1.0, max_diff(rms_norm_of(Slip::none), std::vector<double>(8, 0.0)));
    std::string diagnosis = "rstd = 1 / sqrt(mean(x^2 over the last dim) + eps), y = x * rstd * weight";
    if (max_diff(got, rms_norm_of(Slip::eps_outside)) <= tol)
      diagnosis = mistake("eps-outside-root", "sqrt(mean(x^2)) + eps: eps goes inside the root, sqrt(mean(x^2) + eps)");
    else if (max_diff(got, rms_norm_of(Slip::sum_not_mean)) <= tol)
      diagnosis = mistake("sum-not-mean", "the sum of the squares: RMS is the root of their mean, divide by D");
    INFO(diagnosis << " (rows of size " << scale << ")");
    CHECK(max_diff(got, rms_norm_of(Slip::none)) <= tol);
  }
  // The backward, in float64: dx = rstd (gx - xhat mean(gx xhat)) with gx = dy g, xhat = x rstd; dg = sum dy xhat.
  const std::vector<double> xv{1, 2, -3, 0.5, 4, 4, 1, 0}, dyv{0.3, -1, 2, 0.7, -0.4, 1.5, 0.2, -2};
  Tensor x = from_vector(xv, {2, 4}, {DType::float64}), w = from_vector(g, {4}, {DType::float64});
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  rms_norm(x, w).backward(from_vector(dyv, {2, 4}, {DType::float64}));
  std::vector<double> dx, dx_rstd_constant, dg(4, 0.0);
  for (std::size_t r = 0; r < 2; ++r) {
    double ms = 0, c = 0;
    for (std::size_t i = 0; i < 4; ++i) ms += xv[r * 4 + i] * xv[r * 4 + i] / 4;
    const double rstd = 1 / std::sqrt(ms + 1e-5);
    for (std::size_t i = 0; i < 4; ++i) c += dyv[r * 4 + i] * g[i] * xv[r * 4 + i] * rstd / 4;
    for (std::size_t i = 0; i < 4; ++i) {
      const double gx = dyv[r * 4 + i] * g[i], xhat = xv[r * 4 + i] * rstd;
      dx.push_back(rstd * (gx - xhat * c));
      dx_rstd_constant.push_back(rstd * gx);
      dg[i] += dyv[r * 4 + i] * xhat;
    }
  }
  const auto got_dx = x.grad().to_vector<double>();
  std::string diagnosis = "dx = rstd * (gx - xhat * mean(gx * xhat)), gx = dy * g, xhat = x * rstd";
  if (max_diff(got_dx, dx_rstd_constant) < 1e-9)
    diagnosis = mistake("rstd-constant",
                        "dx = rstd * gx treats rstd as a constant: it depends on every x of the row, which adds "
                        "-rstd * xhat * mean(gx * xhat)");
  INFO(diagnosis);
  CHECK(max_diff(got_dx, dx) < 1e-9);
  CHECK(max_diff(w.grad().to_vector<double>(), dg) < 1e-9);
}

TEST_CASE("ex12.2: RoPE: pair i of position start + t turned by (start + t) base^(-2i/Dh)", "[ex12.2]") {
  Generator gen(122);
  const std::int64_t T = 3, Dh = 8;
  const Tensor x = randn({1, 1, T, Dh}, gen, {DType::float64});
  const auto xv = x.to_vector<double>();
  // The rotation with the angle of position p and pair i given by angle(p, i).
  const auto rotated = [&](std::int64_t start, auto angle) {
    std::vector<double> out(xv.size());
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t i = 0; i < Dh / 2; ++i) {
        const double a = angle(static_cast<double>(start + t), static_cast<double>(i));
        const std::size_t ia = static_cast<std::size_t>(t * Dh + i), ib = ia + Dh / 2;
        out[ia] = xv[ia] * std::cos(a) - xv[ib] * std::sin(a);
        out[ib] = xv[ib] * std::cos(a) + xv[ia] * std::sin(a);
      }
    return out;
  };
  // rope keeps the tables it built and reads them in part (rope.cpp): a table built from position 0 would serve start
  // 5 too and never show which start its angles were computed from. So start 5 comes first, with a base (5000) that
  // no other test asks for, whose tables this test alone builds.
  const double base = 5000;
  const auto theta = [&](double i) { return std::pow(base, -2.0 * i / Dh); };
  for (const std::int64_t start : {5, 0}) {
    const auto got = rope(x, start, RopePairing::half, base).to_vector<double>();
    const auto want = rotated(start, [&](double p, double i) { return p * theta(i); });
    std::string diagnosis = "angle of position p, pair i = p * base^(-2i/Dh), p = start + t";
    if (max_diff(got, rotated(start, [&](double p, double i) {
                   return (i + static_cast<double>(start)) * theta(p - static_cast<double>(start));
                 })) < 1e-9)
      diagnosis = mistake("wrong-axis",
                          "position and pair swapped: the angle must grow with the position t, "
                          "its frequency base^(-2i/Dh) fall with the pair i");
    else if (start > 0 && max_diff(got, rotated(0, [&](double p, double i) { return p * theta(i); })) < 1e-9)
      diagnosis = mistake("position-zero",
                          "the tokens after a cache rotated as if they started at position 0, "
                          "not at start");
    INFO(diagnosis << " (start " << start << ")");
    CHECK(max_diff(got, want) < 1e-9);
  }
}

TEST_CASE("ex12.3: swiglu's backward: g value silu'(gate) to the gate, g silu(gate) to the value", "[ex12.3]") {
  const std::vector<double> gv{-2.0, -0.5, 0.3, 1.7}, vv{0.9, -1.2, 2.0, 0.4}, gout{1.0, -0.5, 2.0, 0.25};
  Tensor gate = from_vector(gv, {4}, {DType::float64}), value = from_vector(vv, {4}, {DType::float64});
  gate.set_requires_grad(true);
  value.set_requires_grad(true);
  swiglu(gate, value).backward(from_vector(gout, {4}, {DType::float64}));
  std::vector<double> want_gate, want_value, silu_of_g;
  for (std::size_t i = 0; i < 4; ++i) {
    const double s = 1 / (1 + std::exp(-gv[i]));
    want_gate.push_back(gout[i] * vv[i] * s * (1 + gv[i] * (1 - s)));
    want_value.push_back(gout[i] * gv[i] * s);
    silu_of_g.push_back(gv[i] * gout[i] / (1 + std::exp(-gout[i])));  // silu_mul(g, gate) = silu(g) gate
  }
  const auto got_gate = gate.grad().to_vector<double>(), got_value = value.grad().to_vector<double>();
  std::string diagnosis = "d/dgate = g * value * silu'(gate), d/dvalue = g * silu(gate)";
  if (max_diff(got_gate, want_value) < 1e-9 && max_diff(got_value, want_gate) < 1e-9)
    diagnosis = mistake("gate-value-swapped", "the gate's gradient given to the value and the value's to the gate");
  else if (max_diff(got_value, silu_of_g) < 1e-9)
    diagnosis = mistake("silu-mul-swapped",
                        "silu_mul(x, y) is silu(x) * y: the value's gradient is "
                        "silu_mul(gate, g), the SiLU of the gate, not of the gradient");
  INFO(diagnosis);
  CHECK(max_diff(got_gate, want_gate) < 1e-9);
  CHECK(max_diff(got_value, want_value) < 1e-9);
}

TEST_CASE("ex12.4: repeat_kv: query head h reads key/value head h / (H / Hkv)", "[ex12.4]") {
  std::vector<double> v;  // kv head j, position t holds 10 j + t
  for (int j = 0; j < 2; ++j)
    for (int t = 0; t < 3; ++t) v.push_back(10 * j + t);
  const auto got = repeat_kv(from_vector(v, {1, 2, 3, 1}), 6).to_vector<double>();
  std::vector<double> want, interleaved;
  for (int h = 0; h < 6; ++h)
    for (int t = 0; t < 3; ++t) {
      want.push_back(10 * (h / 3) + t);
      interleaved.push_back(10 * (h % 2) + t);
    }
  std::string diagnosis = "[B, Hkv, T, Dh] -> [B, H, T, Dh], query head h reading key/value head h / (H / Hkv)";
  if (max_diff(got, interleaved) == 0)
    diagnosis = mistake("heads-interleaved",
                        "query head h read key/value head h % Hkv: a group is H / Hkv "
                        "consecutive heads, h / (H / Hkv)");
  INFO(diagnosis);
  CHECK(max_diff(got, want) == 0);
}

TEST_CASE("ex12.5: top-p keeps the fewest likeliest tokens reaching p, the crossing one included", "[ex12.5]") {
  const std::vector<double> logits{std::log(0.2), std::log(0.5), std::log(0.3)};
  struct Case {
    SamplingOptions o;
    std::vector<double> want;
  };
  for (const Case& c : {Case{{1.0, 0, 0.6}, {0, 0.625, 0.375}}, Case{{1.0, 0, 0.5}, {0, 1, 0}},
                        Case{{1.0, 2, 0.6}, {0, 1, 0}}, Case{{1.0, 0, 1.0}, {0.2, 0.5, 0.3}}}) {
    const auto got = sampling_distribution(logits, c.o);
    std::string diagnosis = "keep the likeliest tokens until their mass reaches top_p of what top-k kept";
    if (c.o.top_p == 0.6 && c.o.top_k == 0 && max_diff(got, {0, 1, 0}) < 1e-12)
      diagnosis = mistake("crossing-token-dropped",
                          "the token whose probability carries the mass past p was "
                          "dropped: the nucleus is the smallest set reaching p");
    INFO(diagnosis << " (top_k " << c.o.top_k << ", top_p " << c.o.top_p << ")");
    CHECK(max_diff(got, c.want) < 1e-12);
  }
  // top_k above the vocabulary keeps every token. The probabilities sit in a vector shrunk from 8 to 3, so that
  // a top_k taken as it is reads the 5 stale values past its end (1000 each) deterministically, instead of
  // whatever memory follows.
  std::vector<double> sorted{0.5, 0.3, 0.2, 1000, 1000, 1000, 1000, 1000};
  sorted.resize(3);
  const std::size_t kept = nucleus_size(sorted.data(), sorted.size(), 5, 1.0);
  if (kept > sorted.size())
    FAIL(mistake("top-k-unclamped", "top_k 5 on 3 tokens kept " + std::to_string(kept) +
                                        ": a top_k above the vocabulary keeps them all; take at most as many as "
                                        "there are, or the loop reads past the end"));
  INFO("top_k 5 on 3 tokens keeps all 3 (top_p 1)");
  CHECK(kept == 3);
}

TEST_CASE("ex12.6: the KV cache: new tokens at positions cache.length().., appended to the cache", "[ex12.6]") {
  Generator gen(126);
  GroupedQueryAttention a(AttentionShape{8, 2, 2, false, true}, gen);  // RoPE, multi-head
  const Tensor x = randn({1, 5, 8}, gen);
  const Tensor full = a(x);
  LayerCache cache(5);
  std::vector<Tensor> steps;
  std::string error;  // a cache that lost tokens can make the next step's shapes disagree
  try {
    for (const auto& [start, length] : std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 2}, {2, 1}, {3, 2}})
      steps.push_back(a(narrow(x, 1, start, length), &cache));
  } catch (const Error& e) {
    error = e.what();
  }
  // The cached keys of the last token: rotated by its own position 4, not by its place in its chunk.
  const Tensor raw_k = permute(view((*a.w_k)(narrow(x, 1, 4, 1)), {1, 1, 2, 4}), {0, 2, 1, 3});  // [1, H, 1, Dh]
  std::string diagnosis = "the cache's length is where the new tokens start; their keys and values are appended";
  if (cache.length() == 5 && close(narrow(cache.keys(), 2, 4, 1), rope(raw_k, 1), 1e-5, 1e-5))
    diagnosis = mistake("position-not-advanced",
                        "the new tokens rotated from their place in the chunk, not from the "
                        "cache's length: every step looked like position 0");
  INFO(diagnosis);
  CHECK(cache.length() == 5);
  REQUIRE(error.empty());
  CHECK(close(cat(steps, 1), full, 1e-5, 1e-5));
  // The last token again, its position 4 read from a tensor (the form of a decode step recorded once on a GPU and
  // replayed: generate on a CUDA device): the cache's rows past it are zero and blocked.
  LayerCache replayed(6);
  a(narrow(x, 1, 0, 4), &replayed);
  replayed.read_position_from(std::make_shared<DevicePosition>(4, 6, x.device()));
  INFO("the cache's position in a tensor (generate on a GPU): cache->position() carries it, its length() does not");
  CHECK(close(a(narrow(x, 1, 4, 1), &replayed), narrow(full, 1, 4, 1), 1e-5, 1e-5));
}
