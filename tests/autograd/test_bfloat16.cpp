// The bfloat16 conversions (autograd/bfloat16.h) against a rounding written a second way: the two
// bfloat16 neighbours of a float, compared as doubles, ties to the even one. Every one of the 65,536
// bit patterns, every tie, and the edges (NaN, infinities, overflow, subnormals, signed zero).
#include <cmath>
#include <cstdint>
#include <limits>

#include "../helpers.h"
#include "autograd/bfloat16.h"

namespace {
using stepformer::bf16_bits_from_float;
using stepformer::float_bits;
using stepformer::float_from_bf16_bits;
using stepformer::float_from_bits;

bool is_nan_bits(std::uint16_t b) { return (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) != 0; }

// Round a finite float to bfloat16 by value: truncation gives the neighbour towards zero, the next pattern
// the one away from zero (for the largest finite bfloat16 that is infinity, as IEEE 754 rounds overflow).
std::uint16_t nearest_even_by_value(float x) {
  const std::uint16_t toward_zero = static_cast<std::uint16_t>(float_bits(x) >> 16);
  const std::uint16_t away = static_cast<std::uint16_t>(toward_zero + 1);
  const double lo = float_from_bf16_bits(toward_zero);
  // Past the largest finite value the next pattern is infinity; IEEE 754 rounds as if the exponent went on,
  // so that neighbour counts as 2^128 with the sign of x.
  const double hi = toward_zero == 0x7F7Fu || toward_zero == 0xFF7Fu ? std::copysign(std::ldexp(1.0, 128), x)
                                                                     : float_from_bf16_bits(away);
  const double dl = std::abs(static_cast<double>(x) - lo), dh = std::abs(hi - static_cast<double>(x));
  if (dl != dh) return dl < dh ? toward_zero : away;
  return (toward_zero & 1u) ? away : toward_zero;
}
}  // namespace

TEST_CASE("bfloat16 -> float32 is exact and float32 -> bfloat16 gives every pattern back", "[bfloat16]") {
  int checked = 0;
  for (std::uint32_t b = 0; b <= 0xFFFFu; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float x = float_from_bf16_bits(bits);
    REQUIRE(float_bits(x) == (b << 16));  // the float is the pattern with 16 zero bits appended
    const std::uint16_t back = bf16_bits_from_float(x);
    if (is_nan_bits(bits)) {
      INFO("pattern " << b);
      REQUIRE(std::isnan(float_from_bf16_bits(back)));
      REQUIRE((back & 0x0040u) != 0);                 // quiet
      REQUIRE((back & 0x8000u) == (bits & 0x8000u));  // sign kept
    } else {
      INFO("pattern " << b);
      REQUIRE(back == bits);
    }
    ++checked;
  }
  CHECK(checked == 65536);
}

TEST_CASE("float32 -> bfloat16 rounds to nearest, ties to even, around every pattern", "[bfloat16]") {
  // For each finite pattern b: the float just above b's value by 0x7FFF, 0x8000 (the tie with b + 1) and
  // 0x8001 units of the dropped bits, compared with the rounding by value.
  int ties_up = 0, ties_down = 0;
  for (std::uint32_t b = 0; b <= 0xFFFFu; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    if ((bits & 0x7F80u) == 0x7F80u) continue;  // infinities and NaN have no neighbours above
    for (std::uint32_t low : {0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
      const float x = float_from_bits((b << 16) | low);
      const std::uint16_t got = bf16_bits_from_float(x), want = nearest_even_by_value(x);
      INFO("float bits 0x" << std::hex << float_bits(x));
      REQUIRE(got == want);
      if (low == 0x8000u) (got == bits ? ties_down : ties_up)++;
    }
  }
  CHECK(ties_down == ties_up);  // half the patterns are even: ties go down from them, up from the odd ones
}

TEST_CASE("float32 -> bfloat16 on a sweep of a million floats matches the rounding by value", "[bfloat16]") {
  // Every 4,093rd float32 pattern (a prime step, so the dropped bits take all kinds of values).
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFull; u += 4093) {
    const float x = float_from_bits(static_cast<std::uint32_t>(u));
    if (std::isnan(x) || std::isinf(x)) continue;
    INFO("float bits 0x" << std::hex << u);
    REQUIRE(bf16_bits_from_float(x) == nearest_even_by_value(x));
  }
}

TEST_CASE("float32 -> bfloat16 edge cases: NaN, infinity, overflow, subnormals, signed zero", "[bfloat16]") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(bf16_bits_from_float(inf) == 0x7F80u);
  CHECK(bf16_bits_from_float(-inf) == 0xFF80u);
  CHECK(bf16_bits_from_float(0.0f) == 0x0000u);
  CHECK(bf16_bits_from_float(-0.0f) == 0x8000u);
  CHECK(bf16_bits_from_float(1.0f) == 0x3F80u);
  // A signalling NaN whose payload lives only in the dropped bits would truncate to infinity.
  CHECK(is_nan_bits(bf16_bits_from_float(float_from_bits(0x7F800001u))));
  CHECK(is_nan_bits(bf16_bits_from_float(float_from_bits(0xFF800001u))));
  CHECK(is_nan_bits(bf16_bits_from_float(std::numeric_limits<float>::quiet_NaN())));
  // The largest finite bfloat16 is 0x7F7F (3.3895e38); halfway to the next binade rounds to infinity (the
  // tie goes to the even pattern, 0x7F80), and so does FLT_MAX. Just below the tie stays finite.
  CHECK(bf16_bits_from_float(float_from_bits(0x7F7F7FFFu)) == 0x7F7Fu);
  CHECK(bf16_bits_from_float(float_from_bits(0x7F7F8000u)) == 0x7F80u);
  CHECK(bf16_bits_from_float(std::numeric_limits<float>::max()) == 0x7F80u);
  CHECK(bf16_bits_from_float(-std::numeric_limits<float>::max()) == 0xFF80u);
  // Subnormals round like any other value; the smallest float subnormal rounds to zero, and a subnormal
  // can round up into the smallest normal.
  CHECK(bf16_bits_from_float(float_from_bits(0x00000001u)) == 0x0000u);
  CHECK(bf16_bits_from_float(float_from_bits(0x007FFFFFu)) == 0x0080u);
  CHECK(bf16_bits_from_float(float_from_bits(0x00018000u)) == 0x0002u);  // tie between 1 and 2: even
  // 1 + 2^-8 is the tie between 1 and 1 + 2^-7: even is 1. 1 + 3 * 2^-8 ties up to 1 + 2^-6.
  CHECK(bf16_bits_from_float(1.0f + 0x1p-8f) == 0x3F80u);
  CHECK(bf16_bits_from_float(1.0f + 3 * 0x1p-8f) == 0x3F82u);
}

TEST_CASE("the bfloat16 type converts explicitly both ways", "[bfloat16]") {
  using stepformer::bfloat16;
  CHECK(static_cast<float>(bfloat16(3.140625f)) == 3.140625f);  // 8 significant bits: exact
  CHECK(static_cast<float>(bfloat16(3.14159265f)) == 3.140625f);
  CHECK(static_cast<double>(bfloat16(-2)) == -2.0);
  CHECK(static_cast<std::int64_t>(bfloat16(257.0)) == 256);  // 257 needs 9 bits; the tie goes to even
  CHECK(bfloat16::from_bits(0x4049u).bits == 0x4049u);
}

// --- bfloat16 tensors (run on every device: [values]) -------------------------------------------------------
namespace {
using namespace stepformer;

Tensor f32(const std::vector<float>& v, const Shape& shape, bool requires_grad = false) {
  return from_vector(v, shape, {DType::float32, default_device(), requires_grad});
}
Tensor uniform_f32(const Shape& shape, std::uint64_t seed, bool requires_grad = false) {
  Generator gen(seed);
  return uniform(shape, -2, 2, gen, {DType::float32, default_device(), requires_grad});
}
// Every element's bits, for exact comparisons.
std::vector<std::uint16_t> bf16_bits(const Tensor& t) {
  std::vector<std::uint16_t> out;
  for (float x : t.to_vector<float>()) out.push_back(bf16_bits_from_float(x));
  return out;
}
std::vector<float> rounded(const std::vector<float>& v) {
  std::vector<float> out;
  for (float x : v) out.push_back(float_from_bf16_bits(bf16_bits_from_float(x)));
  return out;
}
}  // namespace

TEST_CASE("to(bfloat16) rounds to nearest even and to(float32) gives the value back", "[bfloat16][values]") {
  const std::vector<float> v = {1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -3.14159265f, 65504.0f, 1e-30f, 0.0f};
  const Tensor x = f32(v, {7});
  const Tensor b = x.to(DType::bfloat16);
  CHECK(b.dtype() == DType::bfloat16);
  CHECK(b.to_vector<float>() == rounded(v));
  CHECK(b.to(DType::float32).to_vector<float>() == rounded(v));
  CHECK(contiguous(transpose(f32(v, {7, 1}).to(DType::bfloat16), 0, 1)).to_vector<float>() == rounded(v));
  CHECK(b.at({1}) == 1.0);  // the tie goes to the even neighbour
  CHECK(element_size(DType::bfloat16) == 2);
  CHECK(dtype_name(DType::bfloat16) == "bfloat16");
}

TEST_CASE("to(bfloat16) is differentiable: the gradient is converted back to float32", "[bfloat16][values]") {
  const Tensor x = uniform_f32({4, 5}, 1, true);
  const Tensor w = uniform_f32({4, 5}, 2);
  // y = sum(bf16(x) * bf16(w)): the gradient reaching x is bf16(w), computed in bfloat16 and converted back.
  const Tensor y = sum(mul(x.to(DType::bfloat16), w.to(DType::bfloat16)));
  CHECK(y.dtype() == DType::bfloat16);
  y.backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == DType::float32);
  CHECK(x.grad().to_vector<float>() == rounded(w.to_vector<float>()));
}

TEST_CASE("elementwise ops and sums on bfloat16 compute in float32 and round once", "[bfloat16][values]") {
  const Tensor a = uniform_f32({3, 33}, 3).to(DType::bfloat16), b = uniform_f32({33}, 4).to(DType::bfloat16);
  const auto af = a.to_vector<float>(), bf = b.to_vector<float>();
  std::vector<float> want_add, want_mul;
  for (std::size_t i = 0; i < af.size(); ++i) {
    want_add.push_back(af[i] + bf[i % 33]);
    want_mul.push_back(af[i] * bf[i % 33]);
  }
  CHECK(add(a, b).dtype() == DType::bfloat16);
  CHECK(bf16_bits(add(a, b)) == bf16_bits(f32(rounded(want_add), {3, 33})));
  CHECK(bf16_bits(mul(a, b)) == bf16_bits(f32(rounded(want_mul), {3, 33})));
  // A number is a float32 factor, as PyTorch 2's CPU mul kernel reads it: 0.1f, not 0.1 rounded to bfloat16 first
  // (0.10009765625, what Debian's PyTorch 1.13 multiplies by), which gives another bfloat16 for some of these 99.
  std::vector<float> want_scaled, scaled_by_rounded;
  const float tenth_rounded = float_from_bf16_bits(bf16_bits_from_float(0.1f));
  for (const float x : af) {
    want_scaled.push_back(x * 0.1f);
    scaled_by_rounded.push_back(x * tenth_rounded);
  }
  REQUIRE(rounded(want_scaled) != rounded(scaled_by_rounded));
  CHECK((a * 0.1).dtype() == DType::bfloat16);
  CHECK(bf16_bits(a * 0.1) == bf16_bits(f32(rounded(want_scaled), {3, 33})));
  CHECK(bf16_bits(0.1 * a) == bf16_bits(f32(rounded(want_scaled), {3, 33})));
  // So is a number added, taken away or divided by.
  std::vector<float> want_plus, want_minus, want_from, want_over, plus_rounded, over_rounded;
  for (const float x : af) {
    want_plus.push_back(x + 0.1f);
    want_minus.push_back(x - 0.1f);
    want_from.push_back(0.1f - x);
    want_over.push_back(x / 0.1f);
    plus_rounded.push_back(x + tenth_rounded);
    over_rounded.push_back(x / tenth_rounded);
  }
  REQUIRE(rounded(want_plus) != rounded(plus_rounded));
  REQUIRE(rounded(want_over) != rounded(over_rounded));
  CHECK(bf16_bits(a + 0.1) == bf16_bits(f32(rounded(want_plus), {3, 33})));
  CHECK(bf16_bits(0.1 + a) == bf16_bits(f32(rounded(want_plus), {3, 33})));
  CHECK(bf16_bits(a - 0.1) == bf16_bits(f32(rounded(want_minus), {3, 33})));
  CHECK(bf16_bits(0.1 - a) == bf16_bits(f32(rounded(want_from), {3, 33})));
  CHECK((a / 0.1).dtype() == DType::bfloat16);
  CHECK(bf16_bits(a / 0.1) == bf16_bits(f32(rounded(want_over), {3, 33})));
  // The sum of a row is taken in float32 (a bfloat16 running sum would lose the small terms) and rounded once.
  const Tensor ones_row = full({1, 1000}, 1.0, {DType::bfloat16, default_device()});
  CHECK(sum(ones_row).at({}) == 1000.0);  // 1000 = 0b1111101000 fits 8 significant bits
  float running = 0;  // what a bfloat16 accumulator would give: 256 + 1 rounds back to 256 (ties to even)
  for (int i = 0; i < 1000; ++i) running = float_from_bf16_bits(bf16_bits_from_float(running + 1.0f));
  CHECK(running == 256.0f);
  CHECK(mean(ones_row).at({}) == 1.0);
}

TEST_CASE("a bfloat16 tensor read by two ops receives the sum of both gradients", "[bfloat16][values]") {
  const Tensor x = uniform_f32({2, 3}, 5, true);
  const Tensor h = x.to(DType::bfloat16);
  sum(add(mul(h, h), h)).backward();  // d/dh = 2h + 1, summed from three reads in bfloat16
  const auto hv = h.to_vector<float>();
  std::vector<float> want;
  for (float v : hv) want.push_back(float_from_bf16_bits(bf16_bits_from_float(2 * v + 1)));
  const auto got = x.grad().to_vector<float>();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Catch::Approx(want[i]).epsilon(0x1p-7));
}

TEST_CASE("matmul of bfloat16 tensors: a bfloat16 product is the float32 product rounded once", "[bfloat16][values]") {
  // Products of two bfloat16 values are exact in float32, so the float32 product under autocast and the
  // bfloat16 product come from the same sums; rounding the first must give the second bit for bit (a kernel
  // that truncated, or summed in bfloat16, would not).
  for (const auto& [M, K, N] : {std::tuple{5, 7, 3}, std::tuple{64, 96, 80}, std::tuple{130, 300, 150}}) {
    INFO("M=" << M << " K=" << K << " N=" << N);
    const Tensor a = uniform_f32({M, K}, 6), b = uniform_f32({K, N}, 7);
    const Tensor product = matmul(a.to(DType::bfloat16), b.to(DType::bfloat16));
    CHECK(product.dtype() == DType::bfloat16);
    Tensor wide;
    {
      AutocastGuard autocast(DType::bfloat16);
      wide = matmul(a, b);
    }
    CHECK(wide.dtype() == DType::float32);
    CHECK(bf16_bits(product) == bf16_bits(wide));
    // And the float32 product is that of the rounded operands, summed in float32.
    const Tensor exact = matmul(a.to(DType::bfloat16).to(DType::float32), b.to(DType::bfloat16).to(DType::float32));
    CHECK(test::close(wide, exact, 1e-5 * K, 1e-5));
  }
}

TEST_CASE("autocast: matmul reads bfloat16, gradients reach the float32 leaves as float32 sums", "[bfloat16][values]") {
  const Tensor a = uniform_f32({6, 9}, 8, true), b = uniform_f32({9, 4}, 9, true);
  const Tensor g = uniform_f32({6, 4}, 10);
  Tensor y;
  {
    AutocastGuard autocast(DType::bfloat16);
    CHECK(autocast_dtype() == DType::bfloat16);
    {
      AutocastGuard off(DType::bfloat16, /*enabled=*/false);  // nested scopes keep the outer state
      CHECK(autocast_dtype() == DType::bfloat16);
      AutocastGuard fp32(DType::float32);
      CHECK(autocast_dtype() == DType::float32);
    }
    CHECK(autocast_dtype() == DType::bfloat16);
    y = matmul(a, b);
  }
  CHECK(autocast_dtype() == DType::float32);
  CHECK(matmul(a, b).dtype() == DType::float32);
  sum(y * g).backward();
  CHECK(a.grad().dtype() == DType::float32);
  CHECK(b.grad().dtype() == DType::float32);
  // The backward's products read bfloat16 as PyTorch's: bf16(g) @ bf16(b)^T, the same rule as the forward's, so
  // their float32 sums, not rounded to bfloat16 as PyTorch's are (docs/11, deviations).
  Tensor want_a, want_b;
  {
    AutocastGuard autocast(DType::bfloat16);
    want_a = matmul(g, transpose(b.detach(), 0, 1));
    want_b = matmul(transpose(a.detach(), 0, 1), g);
  }
  CHECK(a.grad().to_vector<float>() == want_a.to_vector<float>());
  CHECK(b.grad().to_vector<float>() == want_b.to_vector<float>());
  CHECK_FALSE(test::close(a.grad(), a.grad().to(DType::bfloat16).to(DType::float32), 0, 0));
  REQUIRE_THROWS_WITH_ALL(AutocastGuard(DType::float64), DTypeError, "AutocastGuard", "float64");
}

// A Linear under autocast: x @ w^T with w a parameter, read through a transposed view.
TEST_CASE("autocast: backward casts a parameter again instead of keeping its bfloat16 copy, to the same gradients",
          "[bfloat16][values]") {
  const Tensor x = uniform_f32({64, 256}, 11, true), w = uniform_f32({128, 256}, 12, true);
  const Tensor g = uniform_f32({64, 128}, 13);
  const Device dev = x.device();
  const std::size_t before = bytes_in_use(dev);
  Tensor y;
  {
    AutocastGuard autocast(DType::bfloat16);
    y = matmul(x, transpose(w, 0, 1));
  }
  // y, and the copy of x that w's gradient reads; w's copy is gone with the forward
  CHECK(bytes_in_use(dev) - before ==
        test::bytes_of({64, 128}, DType::float32, dev) + test::bytes_of({64, 256}, DType::bfloat16, dev));
  sum(y * g).backward();
  // The same weight's values as a product of another op: not a parameter's memory, so its copy is kept.
  const Tensor x2 = uniform_f32({64, 256}, 11, true), w2 = uniform_f32({128, 256}, 12, true);
  {
    AutocastGuard autocast(DType::bfloat16);
    sum(matmul(x2, transpose(w2 * 1.0, 0, 1)) * g).backward();
  }
  CHECK(x.grad().to_vector<float>() == x2.grad().to_vector<float>());
  CHECK(w.grad().to_vector<float>() == w2.grad().to_vector<float>());
}

// As torch.autocast's cache: with grad mode off, a scope converts the same memory once, until it is written to.
TEST_CASE("autocast keeps a conversion made without grad for the same memory at the same version, until the scope ends",
          "[bfloat16][values]") {
  Tensor w = uniform_f32({6, 4}, 16);
  const Tensor wt = transpose(w, 0, 1);  // as Linear multiplies by its weight
  auto same_memory = [](const Tensor& a, const Tensor& b) { return a.desc().data == b.desc().data; };
  Tensor from_last_scope;
  {
    AutocastGuard autocast(DType::bfloat16);
    NoGradGuard no_grad;
    const Tensor first = wt.to(DType::bfloat16);
    CHECK(same_memory(wt.to(DType::bfloat16), first));  // kept
    { AutocastGuard inner(DType::bfloat16); }
    CHECK(same_memory(wt.to(DType::bfloat16), first));                 // an inner scope's end keeps it
    const Tensor other_view = transpose(w, 0, 1).to(DType::bfloat16);  // another handle, the same memory
    CHECK(same_memory(other_view, first));
    const Tensor row = narrow(wt, 0, 1, 2).to(DType::bfloat16);  // other memory of the same storage
    CHECK(row.to_vector<double>() == contiguous(narrow(wt, 0, 1, 2)).to(DType::bfloat16).to_vector<double>());

    fill_(w, 0.5);  // the weight written: its conversion is made again, with the new values
    Tensor after_write = wt.to(DType::bfloat16);
    CHECK(!same_memory(after_write, first));
    CHECK(after_write.to_vector<double>() == std::vector<double>(24, 0.5));

    fill_(after_write, 2.0);  // the kept result written: not handed out again
    const Tensor after_result_write = wt.to(DType::bfloat16);
    CHECK(!same_memory(after_result_write, after_write));
    CHECK(after_result_write.to_vector<double>() == std::vector<double>(24, 0.5));
    from_last_scope = after_result_write;
  }
  {
    AutocastGuard autocast(DType::bfloat16);  // a new scope: nothing kept from the last one
    NoGradGuard no_grad;
    const Tensor first = wt.to(DType::bfloat16);
    CHECK(!same_memory(first, from_last_scope));
    { AutocastGuard autocast_ended(DType::bfloat16); }
    CHECK(same_memory(wt.to(DType::bfloat16), first));
  }
  {
    AutocastGuard autocast(DType::bfloat16);
    NoGradGuard no_grad;
    const Tensor first = wt.to(DType::bfloat16);
    const Tensor outside = [&] {
      AutocastGuard off(DType::float32);  // autocast off: to() is a plain conversion
      return wt.to(DType::bfloat16);
    }();
    CHECK(!same_memory(outside, first));
  }
  const Tensor x = uniform_f32({6, 4}, 17, true);  // with grad mode on nothing is kept: each has its own node
  AutocastGuard autocast(DType::bfloat16);
  const Tensor a = x.to(DType::bfloat16), b = x.to(DType::bfloat16);
  CHECK(!same_memory(a, b));
  sum(a.to(DType::float32)).backward();
  sum(b.to(DType::float32)).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>(24, 2.0));
}

// As torch's preserve_format: a permuted dense tensor converts into the same layout; others into a contiguous one.
TEST_CASE("to(dtype) keeps a transposed or permuted tensor's layout and its values; a sliced one becomes contiguous",
          "[bfloat16][values]") {
  const Tensor x = uniform_f32({4, 3, 5}, 14, true);
  for (const Tensor& view : {transpose(x, 0, 2), permute(x, {1, 2, 0}), transpose(x, 1, 2)}) {
    const Tensor converted = view.to(DType::bfloat16);
    CHECK(converted.strides() == view.strides());
    CHECK(converted.to_vector<double>() == contiguous(view).to(DType::bfloat16).to_vector<double>());
    CHECK(converted.to(DType::float32).strides() == view.strides());  // and back
  }
  const Tensor sliced = slice(transpose(x, 0, 2), 0, 1, 5, 2);  // not dense: every other row
  const Tensor from_slice = sliced.to(DType::bfloat16);
  CHECK(from_slice.is_contiguous());
  CHECK(from_slice.to_vector<double>() == contiguous(sliced).to(DType::bfloat16).to_vector<double>());
  // The gradient comes back through the layout: g (rounded to bfloat16 on its way through) in x's shape.
  const Tensor g = uniform_f32({5, 3, 4}, 15);
  sum(transpose(x, 0, 2).to(DType::bfloat16).to(DType::float32) * g).backward();
  const Tensor g_rounded = g.to(DType::bfloat16).to(DType::float32);
  CHECK(x.grad().to_vector<double>() == contiguous(transpose(g_rounded, 0, 2)).to_vector<double>());
}

TEST_CASE("softmax and log_softmax of bfloat16: float32 statistics, the result rounded once", "[bfloat16][values]") {
  // Rows of 37 over either dim; the float64 softmax of the same (bfloat16) values is the oracle. One rounding to
  // bfloat16 is at most half a unit of its last place (8 significant bits): 2^-8 of the value; the float32 work adds
  // far less.
  const Tensor x32 = uniform_f32({3, 37}, 21, true);
  const Tensor x = (x32 * 4.0).to(DType::bfloat16);
  const Tensor x64 = x.to(DType::float64);
  for (const std::int64_t dim : {1, 0}) {
    for (const bool log : {false, true}) {
      const Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
      const Tensor expected = log ? log_softmax(x64, dim) : softmax(x64, dim);
      CHECK(y.dtype() == DType::bfloat16);
      CHECK(test::close(y, expected, 1e-7, 0x1p-8));
    }
  }
  // The gradient: the incoming gradient and the result each rounded to bfloat16 once on their way (the casts'
  // rules), the softmax backward between them in float32.
  const Tensor g = uniform_f32({3, 37}, 22);
  sum(softmax(x, 1).to(DType::float32) * g).backward();
  Tensor x64_leaf = x64.detach();
  x64_leaf.set_requires_grad(true);
  sum(softmax(x64_leaf, 1) * g.to(DType::bfloat16).to(DType::float64)).backward();
  const Tensor expected = x64_leaf.grad() * 4.0;  // x = 4 x32
  CHECK(test::off_by_largest(x32.grad(), expected) <= 0x1p-8);
  REQUIRE_THROWS_WITH_ALL(softmax(x.to(DType::int64)), DTypeError, "softmax", "int64");
}

TEST_CASE("ops that keep float32 statistics refuse bfloat16 by name", "[bfloat16][values]") {
  const Tensor x = uniform_f32({2, 5}, 11).to(DType::bfloat16);
  const Tensor ids = from_vector(std::vector<std::int64_t>{0, 1}, {2}, {DType::int64, default_device()});
  REQUIRE_THROWS_WITH_ALL(layer_norm(x, Tensor(), Tensor()), DTypeError, "layer_norm", "bfloat16 [2, 5]");
  REQUIRE_THROWS_WITH_ALL(cross_entropy(x, ids), DTypeError, "cross_entropy", "bfloat16 [2, 5]");
  REQUIRE_THROWS_WITH_ALL(embedding(x, ids), DTypeError, "embedding", "bfloat16 [2, 5]");
  REQUIRE_THROWS_WITH_ALL(dropout(x, 0.5, true), DTypeError, "dropout", "bfloat16 [2, 5]");
  Generator gen(1);
  REQUIRE_THROWS_WITH_ALL(uniform({2}, 0, 1, gen, {DType::bfloat16}), DTypeError, "float32 or float64", "bfloat16");
  REQUIRE_THROWS_WITH_ALL(matmul(x, uniform_f32({5, 2}, 12)), DTypeError, "matmul", "bfloat16", "float32");
}
