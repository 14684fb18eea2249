// Chapter 12: RMSNorm, SwiGLU, RoPE and grouped-query attention, each checked against its formula computed another
// way (plain loops, other ops) and by the property it is there for.
#include <cmath>

#include "../helpers.h"
#include "autograd/grad_mode.h"
#include "transformer/attention.h"
#include "transformer/grouped_attention.h"
#include "transformer/rms_norm.h"
#include "transformer/swiglu.h"

using namespace stepformer;
using namespace stepformer::transformer;
using stepformer::test::close;
using stepformer::test::max_abs_diff;
using stepformer::test::mistake;

TEST_CASE("RMSNorm: x / sqrt(mean(x^2) + eps) * g; no mean subtracted; scale-invariant", "[ch12]") {
  RMSNorm norm(4);
  {
    const NoGradGuard no_grad;
    copy_(norm.weight, from_vector(std::vector<double>{1, 2, 1, 0.5}, {4}));
  }
  const Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, -1, 0, 0, 1}, {2, 4});
  const double r0 = std::sqrt(7.5 + 1e-5), r1 = std::sqrt(0.5 + 1e-5);
  CHECK(max_abs_diff(norm(x), {1 / r0, 4 / r0, 3 / r0, 2 / r0, -1 / r1, 0, 0, 0.5 / r1}) < 1e-6);
  CHECK(close(norm(x * 1000.0), norm(x), 1e-5, 1e-5));  // the point of a norm
  // LayerNorm would map x + 1 to the same as x; RMSNorm does not: it keeps the mean.
  CHECK(max_abs_diff(norm(x + 1.0), norm(x).to_vector<double>()) > 0.1);
  CHECK(norm.parameter_count() == 4);  // a gain, no bias
  CHECK_THROWS_AS(norm(zeros({2, 3})), ShapeError);
}

TEST_CASE("SwiGLU: W_out (silu(x W_gate) * x W_value), 2/3 of the hidden size for the same parameters", "[ch12]") {
  Generator gen(12);
  SwiGLU ffn(8, 16, gen);
  const Tensor x = randn({2, 3, 8}, gen);
  const Tensor gate = matmul(x, transpose(ffn.w_gate->weight, 0, 1)),
               value = matmul(x, transpose(ffn.w_value->weight, 0, 1));
  const Tensor want = matmul(gate * (1.0 / (1.0 + exp(-gate))) * value, transpose(ffn.w_out->weight, 0, 1));
  CHECK(close(ffn(x), want, 1e-5, 1e-5));
  const std::int64_t D = 256, F = 1024;
  const auto relu_ffn = make_feed_forward(FeedForwardKind::relu, D, F),
             swiglu = make_feed_forward(FeedForwardKind::swiglu, D, F);
  CHECK(swiglu_hidden(F) == 688);
  CHECK(relu_ffn->parameter_count() == 2 * D * F + F + D);
  CHECK(std::abs(static_cast<double>(swiglu->parameter_count()) / static_cast<double>(relu_ffn->parameter_count()) -
                 1) < 0.01);
}

namespace {
// rope's rotation of one head vector written out: pair i = (a, b) at coordinates (i, i + Dh/2) (half) or
// (2i, 2i + 1) (adjacent), turned by position * base^(-2i/Dh).
std::vector<double> rotated(const std::vector<double>& x, std::int64_t position, RopePairing pairing) {
  const std::size_t Dh = x.size(), pairs = Dh / 2;
  std::vector<double> out(Dh);
  for (std::size_t i = 0; i < pairs; ++i) {
    const double angle =
        static_cast<double>(position) * std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(Dh));
    const std::size_t ia = pairing == RopePairing::half ? i : 2 * i,
                      ib = pairing == RopePairing::half ? i + pairs : 2 * i + 1;
    out[ia] = x[ia] * std::cos(angle) - x[ib] * std::sin(angle);
    out[ib] = x[ib] * std::cos(angle) + x[ia] * std::sin(angle);
  }
  return out;
}
}  // namespace

TEST_CASE("rope rotates pair i of position m by m theta_i, for both pairings and any start", "[ch12]") {
  Generator gen(13);
  const Tensor x = randn({1, 2, 5, 8}, gen, {DType::float64});  // [B, H, T, Dh]
  for (const RopePairing pairing : {RopePairing::half, RopePairing::adjacent})
    for (const std::int64_t start : {0, 7}) {
      const Tensor y = rope(x, start, pairing);
      std::vector<double> want;
      for (std::int64_t h = 0; h < 2; ++h)
        for (std::int64_t t = 0; t < 5; ++t) {
          const auto row =
              rotated(view(narrow(narrow(x, 1, h, 1), 2, t, 1), {8}).to_vector<double>(), start + t, pairing);
          want.insert(want.end(), row.begin(), row.end());
        }
      INFO("pairing " << (pairing == RopePairing::half ? "half" : "adjacent") << ", start " << start);
      CHECK(max_abs_diff(y, want) < 1e-12);
    }
  CHECK(close(rope(narrow(x, 2, 0, 1), 0), narrow(x, 2, 0, 1), 0, 0));  // position 0: no rotation
}

TEST_CASE("rope: q_m . k_n depends only on m - n, and the two pairings are different functions", "[ch12]") {
  Generator gen(14);
  const Tensor q = randn({1, 1, 1, 16}, gen, {DType::float64}), k = randn({1, 1, 1, 16}, gen, {DType::float64});
  const auto dot = [&](std::int64_t m, std::int64_t n) { return sum(rope(q, m) * rope(k, n)).item(); };
  CHECK(dot(5, 2) == Catch::Approx(dot(105, 102)).margin(1e-9));
  CHECK(dot(0, 0) == Catch::Approx(sum(q * k).item()).margin(1e-12));
  CHECK(std::abs(dot(5, 2) - dot(5, 3)) > 1e-3);  // and it does depend on m - n
  // Same input, same positions: the pairings disagree (weights trained with one are wrong for the other) ...
  const Tensor half = rope(q, 3, RopePairing::half), adjacent = rope(q, 3, RopePairing::adjacent);
  CHECK(max_abs_diff(half, adjacent) > 0.1);
  // ... yet they are one rotation seen through a permutation of the coordinates: evens first, then odds.
  std::vector<std::int64_t> evens_then_odds;
  for (std::int64_t i = 0; i < 16; i += 2) evens_then_odds.push_back(i);
  for (std::int64_t i = 1; i < 16; i += 2) evens_then_odds.push_back(i);
  const auto permuted = [&](const Tensor& t) {
    const auto v = t.to_vector<double>();
    std::vector<double> p;
    for (const std::int64_t i : evens_then_odds) p.push_back(v[static_cast<std::size_t>(i)]);
    return from_vector(p, {1, 1, 1, 16}, {DType::float64});
  };
  CHECK(max_abs_diff(rope(permuted(q), 3, RopePairing::half), permuted(adjacent)) < 1e-12);
  CHECK_THROWS_AS(rope(zeros({1, 1, 2, 5}), 0), ShapeError);
  CHECK_THROWS_AS(rope_pairing_from_name("interleaved"), ValueError);
}

TEST_CASE("repeat_kv: query head h reads key/value head h / (H / Hkv)", "[ch12]") {
  const Tensor kv = from_vector(std::vector<double>{10, 20}, {1, 2, 1, 1});  // heads 0 and 1
  CHECK(repeat_kv(kv, 4).to_vector<double>() == std::vector<double>{10, 10, 20, 20});
  CHECK(repeat_kv(kv, 2).to_vector<double>() == std::vector<double>{10, 20});
  CHECK_THROWS_AS(repeat_kv(kv, 3), ShapeError);
}

namespace {
// The attention of GroupedQueryAttention written with chapter 02's composite: every head, repeat_kv's mapping
// done by hand, the subsequent mask, the weights kept.
Tensor composite_attention(GroupedQueryAttention& a, const Tensor& x) {
  const std::int64_t H = a.shape.n_heads, group = H / a.shape.n_kv_heads, T = x.size(1);
  const Tensor q = split_heads((*a.w_q)(x), H), k = split_heads((*a.w_k)(x), a.shape.n_kv_heads),
               v = split_heads((*a.w_v)(x), a.shape.n_kv_heads);
  std::vector<Tensor> ks, vs;
  for (std::int64_t h = 0; h < H; ++h) {
    ks.push_back(narrow(k, 1, h / group, 1));
    vs.push_back(narrow(v, 1, h / group, 1));
  }
  const Attention out = scaled_dot_product_attention(q, cat(ks, 1), cat(vs, 1), subsequent_mask(T));
  return (*a.w_o)(merge_heads(out.context));
}
}  // namespace

TEST_CASE("GroupedQueryAttention equals the composite attention with shared heads, and is causal", "[ch12]") {
  Generator gen(15);
  for (const std::int64_t kv_heads : {4, 2, 1}) {
    GroupedQueryAttention a(AttentionShape{16, 4, kv_heads, true, false}, gen);
    const Tensor x = randn({2, 5, 16}, gen);
    INFO(kv_heads << " key/value heads");
    CHECK(close(a(x), composite_attention(a, x), 1e-5, 1e-5));
    CHECK(a.w_k->weight.size(0) == kv_heads * 4);
    // The causal mask: changing the last token changes no earlier output.
    const Tensor changed = cat({narrow(x, 1, 0, 4), randn({2, 1, 16}, gen)}, 1);
    CHECK(close(narrow(a(changed), 1, 0, 4), narrow(a(x), 1, 0, 4), 1e-6, 0));
  }
  CHECK_THROWS_AS(GroupedQueryAttention(AttentionShape{16, 4, 3}), ValueError);
  CHECK_THROWS_AS(GroupedQueryAttention(AttentionShape{12, 4, 4, false, true}), ValueError);  // Dh 3: no pairs
}
