// flash_attention against the composite softmax(Q K^T scale, blocked at -inf) -> dropout -> @ V that chapter 02
// builds from ops: outputs and every gradient, for each mask, lengths on both sides of a tile (128 queries and
// keys on the CPU, up to 32 threads on CUDA), Tq != Tk, Dh != Dv, and dropout drawn from the same generator state.
// On the default device, so CTest runs it on cuda-sim and on a GPU too ([values]).
#include <omp.h>

#include <algorithm>
#include <limits>

#include "../helpers.h"
#include "autograd/autocast.h"

using namespace stepformer;
using stepformer::test::close;
using stepformer::test::max_abs_diff;
using stepformer::test::off_by_largest;

namespace {

Tensor input(const Shape& shape, std::uint64_t seed, DType dtype) {
  Generator gen(seed);
  return uniform(shape, -1.0, 1.0, gen, {dtype, default_device(), true});
}

Tensor bools(const std::vector<double>& v, const Shape& shape) {
  return from_vector(v, shape, {DType::boolean, default_device(), false});
}

// Key j after query i, [1, 1, Tq, Tk].
Tensor after(std::int64_t Tq, std::int64_t Tk) {
  const Tensor j = view(arange(Tk, {DType::int64, default_device()}), {1, Tk});
  const Tensor i = view(arange(Tq, {DType::int64, default_device()}), {Tq, 1});
  return view(gt(j, i), {1, 1, Tq, Tk});
}

Tensor composite(const Tensor& q, const Tensor& k, const Tensor& v, Tensor blocked, double scale, bool causal, double p,
                 Generator& gen) {
  Tensor s = matmul(q, transpose(k, -2, -1)) * scale;
  if (causal)
    blocked = blocked.defined() ? logical_or(blocked, after(q.size(2), k.size(2))) : after(q.size(2), k.size(2));
  if (blocked.defined()) s = masked_fill(s, blocked, -std::numeric_limits<double>::infinity());
  return matmul(dropout(softmax(s, -1), p, p > 0, gen), v);
}

struct AttentionCase {
  const char* what;
  std::int64_t B, H, Tq, Tk, Dh, Dv;
  bool pad = false, causal = false, subsequent = false;
  double p = 0;
  bool rising = false;  // later keys score higher: the running max grows at every tile
};

const std::vector<AttentionCase> kAttentionCases = {
    {"no mask, one query", 1, 1, 1, 5, 4, 4},
    {"no mask, Tq 133 != Tk 33, Dh 8 != Dv 5 (partial tiles)", 2, 1, 133, 33, 8, 5},
    {"pad mask [B, 1, 1, Tk]", 2, 3, 9, 140, 4, 6, true},
    {"causal flag, T 135", 1, 2, 135, 135, 8, 8, false, true},
    {"causal flag and pad mask", 2, 1, 40, 40, 4, 4, true, true},
    {"subsequent mask as a tensor [1, 1, T, T]", 1, 2, 37, 37, 4, 4, false, false, true},
    {"causal with dropout 0.25 (the mask dropout() draws)", 2, 2, 35, 35, 4, 3, false, true, false, 0.25},
    {"pad mask with dropout 0.5", 1, 2, 6, 130, 4, 4, true, false, false, 0.5},
    {"causal with dropout 0.1 and a pad mask, T 131", 1, 1, 131, 131, 4, 4, true, true, false, 0.1},
    {"scores rising along 300 keys (the max grows at every tile)", 1, 2, 3, 300, 4, 4, false, false, false, 0, true},
    {"causal, scores rising, T 260", 1, 1, 260, 260, 4, 4, false, true, false, 0, true},
    // Heads the CUDA backend's bfloat16 forward runs on the tensor cores (Dh == Dv in {16, 32, 64, 128}), over
    // more than one block of 64 queries and tile of 64 keys; past two tiles, so that each kernel's two stages are
    // both refilled (keys for the forward and dQ, queries for dK and dV).
    {"Dh 64, causal, T 100", 1, 2, 100, 100, 64, 64, false, true},
    {"Dh 32, pad mask and dropout 0.25, Tq 70 != Tk 90", 2, 1, 70, 90, 32, 32, true, false, false, 0.25},
    {"Dh 16, scores rising along 150 keys", 1, 1, 5, 150, 16, 16, false, false, false, 0, true},
    {"Dh 128, subsequent mask as a tensor, T 66", 1, 1, 66, 66, 128, 128, false, false, true},
    {"Dh 16, pad mask, Tq 200 over Tk 20", 1, 1, 200, 20, 16, 16, true},
    // One query a head, as a decoding step has (CUDA's attention_decode_kernel): its scores must round as the
    // backward recomputes them, or q's gradient moves by their rounding where scores are large.
    {"one query, Dh 64, scores rising along 150 keys", 2, 3, 1, 150, 64, 64, false, false, false, 0, true},
    {"one query, Dh 40 != Dv 24, pad mask and dropout 0.3", 2, 2, 1, 70, 40, 24, true, false, false, 0.3},
};

// A case's q, k, v (requiring grad), the incoming gradient g and the mask, in dtype dt.
struct AttentionInputs {
  Tensor q, k, v, g, blocked;
};
AttentionInputs attention_inputs(const AttentionCase& c, DType dt) {
  Tensor q = input({c.B, c.H, c.Tq, c.Dh}, 1, dt), k = input({c.B, c.H, c.Tk, c.Dh}, 2, dt);
  const Tensor v = input({c.B, c.H, c.Tk, c.Dv}, 3, dt), g = input({c.B, c.H, c.Tq, c.Dv}, 4, dt).detach();
  if (c.rising) {  // q > 0 and k growing with j: score (i, j) grows with j
    const Tensor ramp = view(arange(c.Tk, {dt, default_device()}), {1, 1, c.Tk, 1}) * (6.0 / c.Tk);
    q = (q.detach() + 1.5).set_requires_grad();
    k = (k.detach() + ramp).set_requires_grad();
  }
  Tensor blocked;
  if (c.pad) {  // the last third of each batch's keys are PAD, a different number per batch
    std::vector<double> pads;
    for (std::int64_t b = 0; b < c.B; ++b)
      for (std::int64_t j = 0; j < c.Tk; ++j) pads.push_back(j >= c.Tk - (c.Tk / 3 + b) ? 1 : 0);
    blocked = bools(pads, {c.B, 1, 1, c.Tk});
  }
  if (c.subsequent) blocked = after(c.Tq, c.Tk);
  return {q, k, v, g, blocked};
}

}  // namespace

TEST_CASE("flash_attention equals the composite attention, forward and every gradient, for every mask",
          "[attention][values]") {
  for (const DType dt : {DType::float64, DType::float32})
    for (const AttentionCase& c : kAttentionCases) {
      DYNAMIC_SECTION(dtype_name(dt) << ": " << c.what) {
        const auto [q, k, v, g, blocked] = attention_inputs(c, dt);
        const double scale = 1.0 / std::sqrt(static_cast<double>(c.Dh));
        Generator gen_a(11), gen_b(11);
        const std::vector<Tensor> a = {q, k, v}, b = {q.detach().set_requires_grad(), k.detach().set_requires_grad(),
                                                      v.detach().set_requires_grad()};
        const Tensor want = composite(a[0], a[1], a[2], blocked, scale, c.causal, c.p, gen_a);
        const Tensor got = flash_attention(b[0], b[1], b[2], blocked, scale, c.causal, c.p, c.p > 0, gen_b);
        CHECK(gen_a.offset() == gen_b.offset());  // the draws that follow stay the same too
        const double tol = dt == DType::float64 ? 1e-12 : 1e-5;
        CHECK(close(got, want, tol, tol));
        want.backward(g);
        got.backward(g);
        for (std::size_t i = 0; i < 3; ++i) {
          INFO("the gradient of "
               << "qkv"[i]);
          CHECK(close(b[i].grad(), a[i].grad(), tol, tol));
        }
      }
    }
}

// bfloat16 operands: the kernels multiply bfloat16 and sum in float32, rounding the weights and ds to bfloat16
// before the products that read them and each result once. The oracle is the float64 composite of the same
// (already rounded) operands, so what differs is those roundings alone: a few of bfloat16's half-ulp 2^-9 relative
// to the largest value (measured up to 2.4 of them). dq = scale sum_j ds_j k_j is the exception: sum_j ds_j is 0
// exactly but not once each ds_j is rounded, so where the keys share a large common part (the rising cases add up
// to 6 to every key) dq is a small difference of large terms (measured up to 13 half-ulps of its largest value).
// A wrong tile, band, scale or mask is off by far more.
TEST_CASE("flash_attention on bfloat16 operands: within bfloat16's rounding of the float64 attention, every mask",
          "[attention][values][bfloat16]") {
  constexpr double kRoundings = 4.0 / 512, kRoundingsDq = 16.0 / 512;  // in half-ulps of the largest value
  for (const AttentionCase& c : kAttentionCases) {
    DYNAMIC_SECTION(c.what) {
      const auto [q32, k32, v32, g32, blocked] = attention_inputs(c, DType::float32);
      const auto rounded = [](const Tensor& t) { return t.detach().to(DType::bfloat16); };
      const std::vector<Tensor> b = {rounded(q32).set_requires_grad(), rounded(k32).set_requires_grad(),
                                     rounded(v32).set_requires_grad()};
      const std::vector<Tensor> a = {b[0].detach().to(DType::float64).set_requires_grad(),
                                     b[1].detach().to(DType::float64).set_requires_grad(),
                                     b[2].detach().to(DType::float64).set_requires_grad()};
      const Tensor g = rounded(g32);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.Dh));
      Generator gen_a(11), gen_b(11);
      const Tensor want = composite(a[0], a[1], a[2], blocked, scale, c.causal, c.p, gen_a);
      const Tensor got = flash_attention(b[0], b[1], b[2], blocked, scale, c.causal, c.p, c.p > 0, gen_b);
      CHECK(got.dtype() == DType::bfloat16);
      INFO("output off by " << off_by_largest(got, want) << " of its largest value");
      CHECK(off_by_largest(got, want) <= kRoundings);
      want.backward(g.to(DType::float64));
      got.backward(g);
      for (std::size_t i = 0; i < 3; ++i) {
        INFO("the gradient of "
             << "qkv"[i] << ", off by " << off_by_largest(b[i].grad(), a[i].grad()));
        CHECK(b[i].grad().dtype() == DType::bfloat16);
        CHECK(off_by_largest(b[i].grad(), a[i].grad()) <= (i == 0 ? kRoundingsDq : kRoundings));
      }
    }
  }
}

// Under autocast flash_attention runs on bfloat16 copies of float32 operands and returns float32, as matmul does
// (docs/11): the same numbers as calling it on the copies, and the gradients reach the float32 tensors.
TEST_CASE("under bfloat16 autocast flash_attention multiplies bfloat16 copies and returns float32",
          "[attention][values][bfloat16]") {
  const auto [q, k, v, g, blocked] = attention_inputs(kAttentionCases[4], DType::float32);  // causal flag and pad mask
  Tensor out;
  {
    AutocastGuard autocast(DType::bfloat16);
    out = flash_attention(q, k, v, blocked, 0.5, true);
  }
  CHECK(out.dtype() == DType::float32);
  const std::vector<Tensor> b = {q.detach().to(DType::bfloat16).set_requires_grad(),
                                 k.detach().to(DType::bfloat16).set_requires_grad(),
                                 v.detach().to(DType::bfloat16).set_requires_grad()};
  const Tensor want = flash_attention(b[0], b[1], b[2], blocked, 0.5, true);
  CHECK(close(out, want, 0, 0));
  CHECK(max_abs_diff(out, flash_attention(q.detach(), k.detach(), v.detach(), blocked, 0.5, true)) > 0);
  out.backward(g);
  want.backward(g.to(DType::bfloat16));
  const Tensor* in[] = {&q, &k, &v};
  for (std::size_t i = 0; i < 3; ++i) {
    INFO("the gradient of "
         << "qkv"[i]);
    CHECK(in[i]->grad().dtype() == DType::float32);
    CHECK(close(in[i]->grad(), b[i].grad(), 0, 0));
  }
}

// A thread owns a whole head in backward and a (head, query block) pair in forward (cpu/attention.cpp), so the
// thread count changes who computes what, never the order of a sum: 1 and 2 threads give the same bits.
TEST_CASE("flash_attention: 1 or 2 threads give the same bits, float32 and bfloat16", "[attention][values]") {
  const AttentionCase c = {
      "6 heads of two tiles: causal, a pad mask, dropout 0.1", 2, 3, 150, 150, 8, 8, true, true, false, 0.1};
  const int before = omp_get_max_threads();
  for (const DType dt : {DType::float32, DType::bfloat16}) {
    std::vector<std::vector<double>> seen;
    for (const int threads : {1, 2}) {
      omp_set_num_threads(threads);
      const auto [q32, k32, v32, g32, blocked] = attention_inputs(c, DType::float32);
      const std::vector<Tensor> in = {q32.detach().to(dt).set_requires_grad(), k32.detach().to(dt).set_requires_grad(),
                                      v32.detach().to(dt).set_requires_grad()};
      Generator gen(5);
      const Tensor out = flash_attention(in[0], in[1], in[2], blocked, 0.5, c.causal, c.p, true, gen);
      out.backward(g32.to(dt));
      seen.push_back(out.to_vector<double>());
      for (const Tensor& t : in) {
        const auto g = t.grad().to_vector<double>();
        seen.back().insert(seen.back().end(), g.begin(), g.end());
      }
    }
    INFO(dtype_name(dt));
    CHECK(seen[0] == seen[1]);
  }
  omp_set_num_threads(before);
}

TEST_CASE("flash_attention: a query that may see no key gets NaN, as the composite's softmax of -infs",
          "[attention][values]") {
  const Tensor q = input({1, 1, 2, 4}, 1, DType::float64), k = input({1, 1, 3, 4}, 2, DType::float64),
               v = input({1, 1, 3, 4}, 3, DType::float64);
  const Tensor blocked = bools({1, 1, 1, 0, 1, 0}, {1, 1, 2, 3});  // query 0 sees nothing, query 1 keys 0 and 2
  Generator gen(1);
  const Tensor want = composite(q, k, v, blocked, 0.5, false, 0, gen);
  const Tensor got = flash_attention(q, k, v, blocked, 0.5);
  const auto w = want.to_vector<double>(), o = got.to_vector<double>();
  for (int d = 0; d < 4; ++d) {
    CHECK(std::isnan(w[static_cast<std::size_t>(d)]));
    CHECK(std::isnan(o[static_cast<std::size_t>(d)]));
    CHECK(o[static_cast<std::size_t>(4 + d)] == Catch::Approx(w[static_cast<std::size_t>(4 + d)]).epsilon(1e-12));
  }
  // Backward differs there (docs/02): the composite's softmax of -infs is NaN, so dV takes NaN from that row,
  // as PyTorch's does; flash gives the row weight 0, and dV stays finite.
  const auto dv_has_nan = [](const Tensor& out, const Tensor& value) {
    sum(out).backward();
    const auto g = value.grad().to_vector<double>();
    return std::any_of(g.begin(), g.end(), [](double x) { return std::isnan(x); });
  };
  const Tensor v1 = input({1, 1, 3, 4}, 3, DType::float64), v2 = input({1, 1, 3, 4}, 3, DType::float64);
  CHECK(dv_has_nan(composite(q, k, v1, blocked, 0.5, false, 0, gen), v1));
  CHECK_FALSE(dv_has_nan(flash_attention(q, k, v2, blocked, 0.5), v2));
}

// The same rule for bfloat16 heads of 16 (on the CUDA backend, its tensor-core forward): NaN for the query that sees
// nothing, the float64 composite's values within bfloat16's rounding for the other, and a finite dV.
TEST_CASE("flash_attention in bfloat16, Dh 16: a query that may see no key gets NaN, its dV stays finite",
          "[attention][values][bfloat16]") {
  const auto operand = [](std::int64_t rows, std::uint64_t seed) {
    return input({1, 1, rows, 16}, seed, DType::float32).detach().to(DType::bfloat16).set_requires_grad();
  };
  const Tensor q = operand(2, 1), k = operand(3, 2), v = operand(3, 3);
  const Tensor blocked = bools({1, 1, 1, 0, 1, 0}, {1, 1, 2, 3});  // query 0 sees nothing, query 1 keys 0 and 2
  Generator gen(1);
  const auto wide = [](const Tensor& t) { return t.detach().to(DType::float64); };
  const Tensor want = composite(wide(q), wide(k), wide(v), blocked, 0.25, false, 0, gen);
  const Tensor got = flash_attention(q, k, v, blocked, 0.25);
  const auto w = want.to_vector<double>(), o = got.to_vector<double>();
  for (std::size_t d = 0; d < 16; ++d) {
    CHECK(std::isnan(o[d]));
    CHECK(std::abs(o[16 + d] - w[16 + d]) <= 4.0 / 512 * std::abs(w[16 + d]) + 1e-3);
  }
  sum(got).backward();
  const auto dv = v.grad().to_vector<double>();
  CHECK(std::none_of(dv.begin(), dv.end(), [](double x) { return std::isnan(x); }));
}

TEST_CASE("flash_attention keeps O(T) for backward; the composite keeps the [T, T] weights", "[attention][values]") {
  const std::int64_t B = 1, H = 2, T = 256, D = 16;
  const Tensor q = input({B, H, T, D}, 1, DType::float32), k = input({B, H, T, D}, 2, DType::float32),
               v = input({B, H, T, D}, 3, DType::float32);
  Backend& backend = backend_for(default_device());
  const std::size_t before = backend.bytes_in_use();
  Tensor out = flash_attention(q, k, v, {}, 0.25, true);
  const std::size_t flash = backend.bytes_in_use() - before;
  out = Tensor();
  const std::size_t after_flash = backend.bytes_in_use();
  Generator gen(1);
  out = composite(q, k, v, {}, 0.25, true, 0, gen);
  const std::size_t composite_bytes = backend.bytes_in_use() - after_flash;
  const std::size_t square = sizeof(float) * B * H * T * T;        // one [B, H, T, T] float tensor
  const std::size_t linear = sizeof(float) * B * H * T * (D + 1);  // the output and the logsumexp
  INFO("held after forward: flash " << flash << " bytes, composite " << composite_bytes << " bytes; [T, T] is "
                                    << square << " bytes, out + lse " << linear);
  CHECK(flash == linear);
  // The weights (softmax keeps its output), and not the scores as well: scores * 1/sqrt(d_k) keeps nothing (PyTorch's
  // mul by a number keeps nothing either).
  CHECK(composite_bytes >= square);
  CHECK(composite_bytes < 2 * square);
}

// Grouped-query attention: q has H heads, k and v Hkv (dividing H), and query head h reads key/value head
// h / (H / Hkv). The oracle is the same call on k and v repeated to H contiguous heads (repeat_kv's layout, chapter
// 12), which the test above holds to the composite. k and v are also given as the first Tk rows of a longer buffer
// (a KV cache's), which the kernels read in place. The forward must be the same bits (the same products in the same
// order); dk and dv are each group's sum, which the oracle's expand backward takes in another order.
TEST_CASE("flash_attention shares key/value heads among query heads and reads them from a longer buffer",
          "[attention][values]") {
  struct Case {
    const char* what;
    std::int64_t H, Hkv, Tq, Tk, Dh;
    bool causal, pad;
  };
  const std::vector<Case> cases = {
      {"4 query heads on 2, causal, T 130", 4, 2, 130, 130, 8, true, false},
      {"4 query heads on 1 (multi-query), pad mask", 4, 1, 7, 40, 4, false, true},
      {"2 on 2 (multi-head), one query against 35 keys", 2, 2, 1, 35, 4, false, false},
      {"4 on 2, Dh 16 (the CUDA tensor cores' bfloat16 forward), causal, T 70", 4, 2, 70, 70, 16, true, false},
  };
  const std::int64_t B = 2, capacity_extra = 9;
  for (const DType dt : {DType::float64, DType::float32, DType::bfloat16})
    for (const Case& c : cases) {
      DYNAMIC_SECTION(dtype_name(dt) << ": " << c.what) {
        const auto leaf = [&](const Shape& shape, std::uint64_t seed) {  // bfloat16: float32 draws, rounded
          return input(shape, seed, dt == DType::bfloat16 ? DType::float32 : dt).to(dt).detach().set_requires_grad();
        };
        const Tensor q = leaf({B, c.H, c.Tq, c.Dh}, 1);
        const Tensor k_buffer = leaf({B, c.Hkv, c.Tk + capacity_extra, c.Dh}, 2);
        const Tensor v_buffer = leaf({B, c.Hkv, c.Tk + capacity_extra, c.Dh}, 3);
        const Tensor g = leaf({B, c.H, c.Tq, c.Dh}, 4).detach();
        Tensor blocked;
        if (c.pad) {  // the last 6 keys are PAD
          std::vector<double> pads(static_cast<std::size_t>(c.Tk), 0.0);
          std::fill(pads.end() - 6, pads.end(), 1.0);
          blocked = bools(pads, {1, 1, 1, c.Tk});
        }
        const auto repeated = [&](const Tensor& x) {  // [B, Hkv, Tk, D] -> [B, H, Tk, D], contiguous
          return contiguous(
              reshape(expand(unsqueeze(x, 2), {B, c.Hkv, c.H / c.Hkv, c.Tk, c.Dh}), {B, c.H, c.Tk, c.Dh}));
        };
        const Tensor kb = k_buffer.detach().set_requires_grad(), vb = v_buffer.detach().set_requires_grad();
        const Tensor qb = q.detach().set_requires_grad();
        const double scale = 0.5;
        const Tensor want = flash_attention(q, repeated(narrow(k_buffer, 2, 0, c.Tk)),
                                            repeated(narrow(v_buffer, 2, 0, c.Tk)), blocked, scale, c.causal);
        const Tensor got =
            flash_attention(qb, narrow(kb, 2, 0, c.Tk), narrow(vb, 2, 0, c.Tk), blocked, scale, c.causal);
        CHECK(max_abs_diff(got, want) == 0);
        want.backward(g);
        got.backward(g);
        const double tol = dt == DType::float64 ? 1e-12 : dt == DType::float32 ? 1e-5 : 1e-2;
        CHECK(close(qb.grad(), q.grad(), tol, tol));
        CHECK(close(kb.grad(), k_buffer.grad(), tol, tol));
        CHECK(close(vb.grad(), v_buffer.grad(), tol, tol));
      }
    }
}

TEST_CASE("flash_attention refuses bad operands by name", "[attention][values]") {
  const Tensor q = input({1, 2, 3, 4}, 1, DType::float32), k = input({1, 2, 5, 4}, 2, DType::float32),
               v = input({1, 2, 5, 6}, 3, DType::float32);
  CHECK_THROWS_WITH(
      flash_attention(q, input({1, 2, 5, 3}, 2, DType::float32), v, {}, 1.0),
      Catch::Matchers::ContainsSubstring("flash_attention") && Catch::Matchers::ContainsSubstring("[1, 2, 5, 3]"));
  CHECK_THROWS_AS(flash_attention(q, k, input({1, 2, 4, 6}, 3, DType::float32), {}, 1.0), ShapeError);
  CHECK_THROWS_WITH(flash_attention(input({1, 3, 3, 4}, 1, DType::float32), k, v, {}, 1.0),
                    Catch::Matchers::ContainsSubstring("Hkv dividing H"));  // 3 query heads cannot share 2
  CHECK_THROWS_AS(flash_attention(view(q, {2, 3, 4}), k, v, {}, 1.0), ShapeError);
  CHECK_THROWS_WITH(flash_attention(q, k, v, bools({0, 1, 0}, {1, 1, 1, 3}), 1.0),
                    Catch::Matchers::ContainsSubstring("mask [1, 1, 1, 3]"));
  CHECK_THROWS_AS(flash_attention(q, k, v, zeros({1, 1, 1, 5}, {DType::float32, default_device()}), 1.0), DTypeError);
  CHECK_THROWS_AS(flash_attention(q, k, v, {}, 1.0, false, 1.5, true), ValueError);
  CHECK_THROWS_WITH(flash_attention(q.to(DType::bfloat16), k, v, {}, 1.0),
                    Catch::Matchers::ContainsSubstring("flash_attention") &&
                        Catch::Matchers::ContainsSubstring("bfloat16 [1, 2, 3, 4] and float32 [1, 2, 5, 4]"));
  CHECK_THROWS_AS(flash_attention(q.to(DType::int64), k.to(DType::int64), v.to(DType::int64), {}, 1.0), DTypeError);
}

namespace {

// `t` [B, 1, 1, Tk] seen as [B, H, Tq, Tk] through strides of 0, as the op hands a mask to its kernels.
TensorDesc broadcast_keys(const Tensor& t, std::int64_t H, std::int64_t Tq) {
  TensorDesc d = t.desc();
  d.shape[1] = H, d.shape[2] = Tq, d.strides[1] = 0, d.strides[2] = 0;
  return d;
}

}  // namespace

// Exercise 9.5 (chapter 09: it is a CUDA kernel; FlashAttention itself is chapter 02's), graded on cuda-sim: the CUDA
// forward kernel against the CPU backend's, kernel to kernel (no autograd, so no other exercise is needed), in float64;
// then the backward kernel, which reads the lse it wrote.
TEST_CASE("ex9.5: flash attention's CUDA forward: each tile's scores, the online softmax, the output and its lse",
          "[ex9.5]") {
  const Device sim{DeviceType::cuda_sim, 0};
  const struct {
    const char* what;
    std::int64_t Tq, Tk;
    bool causal, pad, rising;
    double p;
  } setups[] = {
      {"scores rising along 100 keys: the max grows at every tile of 32, so l and acc must be rescaled each time", 3,
       100, false, false, true, 0},
      {"causal, T 70: key j blocked after query i, j counted in the whole sequence (a tile starts at key j0)", 70, 70,
       true, false, false, 0},
      {"a pad mask over 40 keys (the last third of each batch's), and dropout 0.3", 9, 40, false, true, false, 0.3},
  };
  for (const auto& c : setups) {
    INFO(c.what);
    const std::int64_t B = 2, H = 2, Dh = 8, Dv = 5;
    const Options cpu{DType::float64, kCPU};
    Generator gen(3);
    Tensor q = uniform({B, H, c.Tq, Dh}, -1, 1, gen, cpu), k = uniform({B, H, c.Tk, Dh}, -1, 1, gen, cpu);
    const Tensor v = uniform({B, H, c.Tk, Dv}, -1, 1, gen, cpu), g = uniform({B, H, c.Tq, Dv}, -1, 1, gen, cpu);
    if (c.rising) {
      q = q + 1.5;
      k = k + view(arange(c.Tk, cpu), {1, 1, c.Tk, 1}) * (6.0 / static_cast<double>(c.Tk));
    }
    std::vector<double> pads;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t j = 0; j < c.Tk; ++j) pads.push_back(c.pad && j >= c.Tk - c.Tk / 3 ? 1 : 0);
    const Tensor pad = from_vector(pads, {B, 1, 1, c.Tk}, {DType::boolean, kCPU});
    AttentionConfig cfg;
    cfg.scale = 0.35, cfg.causal = c.causal, cfg.dropout = c.p, cfg.seed = 5, cfg.offset = 8;
    const auto run = [&](Device dev) {
      const Tensor qd = q.to(dev), kd = k.to(dev), vd = v.to(dev), mask = pad.to(dev);
      const TensorDesc blocked = c.pad ? broadcast_keys(mask, H, c.Tq) : TensorDesc{};
      const Options o{DType::float64, dev};
      Tensor out = full({B, H, c.Tq, Dv}, NAN, o), lse = full({B, H, c.Tq}, NAN, o);
      backend_for(dev).attention_forward(out.desc(), lse.desc(), qd.desc(), kd.desc(), vd.desc(), blocked, cfg);
      Tensor dq = full(q.shape(), NAN, o), dk = full(k.shape(), NAN, o), dv = full(v.shape(), NAN, o);
      backend_for(dev).attention_backward(dq.desc(), dk.desc(), dv.desc(), g.to(dev).desc(), qd.desc(), kd.desc(),
                                          vd.desc(), out.desc(), lse.desc(), blocked, cfg);
      return std::vector<Tensor>{out.cpu(), lse.cpu(), dq.cpu(), dk.cpu(), dv.cpu()};
    };
    const std::vector<Tensor> want = run(kCPU), got = run(sim);
    {
      INFO("out: softmax over every key the query may see, times the values (the CPU backend's result)");
      CHECK(close(got[0], want[0], 1e-12, 1e-12));
    }
    {
      INFO("lse = the final max + log of the final sum: backward recomputes every weight from it");
      CHECK(close(got[1], want[1], 1e-12, 1e-12));
    }
    for (std::size_t i = 2; i < 5; ++i) {
      INFO("the gradient of "
           << "qkv"[i - 2] << ", which backward computes from your out and lse");
      CHECK(close(got[i], want[i], 1e-12, 1e-12));
    }
  }
}
