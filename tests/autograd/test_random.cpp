// The counter-based generator: known answers, reproducibility, thread-count independence.
#include <omp.h>

#include "../helpers.h"

using namespace stepformer;

TEST_CASE("Philox4x32-10 matches the published known-answer vector", "[ch00][random]") {
  // Random123's kat_vectors: philox4x32 10 rounds, counter 0 and key 0.
  const Philox4x32 r = philox4x32_10(0, 0);
  CHECK(r.v[0] == 0x6627e8d5u);
  CHECK(r.v[1] == 0xe169c58du);
  CHECK(r.v[2] == 0xbc57ac4cu);
  CHECK(r.v[3] == 0x9b00dbd8u);
}

TEST_CASE("the same seed gives the same tensors; the generator advances", "[ch00][random]") {
  Generator g1(42), g2(42);
  const auto a = randn({3, 4}, g1).to_vector<float>();
  const auto b = randn({3, 4}, g2).to_vector<float>();
  CHECK(a == b);
  const auto c = randn({3, 4}, g1).to_vector<float>();
  CHECK(a != c);
  Generator g3(43);
  CHECK(randn({3, 4}, g3).to_vector<float>() != a);
}

TEST_CASE("restoring a generator's offset reproduces the next draw", "[ch00][random]") {
  Generator g(5);
  (void)rand({7}, g);
  const std::uint64_t offset = g.offset();
  const auto next = rand({9}, g).to_vector<double>();
  Generator resumed(5);
  resumed.set_offset(offset);
  CHECK(rand({9}, resumed).to_vector<double>() == next);
}

TEST_CASE("uniform and normal have the right moments and range", "[ch00][random]") {
  Generator g(1);
  const auto u = uniform({100000}, -2.0, 3.0, g, {DType::float32}).to_vector<double>();
  double mean_u = 0, lo = 1e9, hi = -1e9;
  for (double v : u) mean_u += v, lo = std::min(lo, v), hi = std::max(hi, v);
  mean_u /= static_cast<double>(u.size());
  CHECK(std::abs(mean_u - 0.5) < 0.02);
  CHECK(lo >= -2.0);
  CHECK(hi < 3.0);

  const auto n = normal({100000}, 1.0, 2.0, g, {DType::float64}).to_vector<double>();
  double m = 0, s2 = 0;
  for (double v : n) m += v;
  m /= static_cast<double>(n.size());
  for (double v : n) s2 += (v - m) * (v - m);
  s2 /= static_cast<double>(n.size());
  CHECK(std::abs(m - 1.0) < 0.03);
  CHECK(std::abs(std::sqrt(s2) - 2.0) < 0.03);
}

TEST_CASE("dropout masks are identical for 1 and 2 OpenMP threads", "[ch00][random]") {
  // Large enough to take the parallel path (> kParallelGrain elements).
  const Tensor x = ones({256, 512});
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  Generator g1(9);
  const auto one = dropout(x, 0.3, true, g1).to_vector<float>();
  omp_set_num_threads(2);
  Generator g2(9);
  const auto two = dropout(x, 0.3, true, g2).to_vector<float>();
  omp_set_num_threads(before);
  CHECK(one == two);
  std::size_t zeros_count = 0;
  for (float v : one) {
    zeros_count += v == 0.0f;
    CHECK((v == 0.0f || std::abs(v - 1.0f / 0.7f) < 1e-6f));
  }
  CHECK(std::abs(static_cast<double>(zeros_count) / static_cast<double>(one.size()) - 0.3) < 0.01);
}

// Each element is 0 where uniform01(random_bits(seed, offset, i)) < p, else 1 / (1 - p): the CPU's AVX-512 mask
// decides it on the integers and computes 16 elements' Philox blocks at once, so check the boundary, a block counter
// that crosses 2^32 within the fill, and the elements after the last whole 16.
TEST_CASE("a dropout mask is uniform01(random_bits(seed, offset, i)) < p, element by element",
          "[ch00][random][values]") {
  const std::uint64_t seed = 0x123456789ull, offset = 4 * ((std::uint64_t{1} << 32) - 37);  // blocks cross 2^32
  const std::int64_t n = 300, boundary = 77;
  const double at = uniform01(random_bits(seed, offset, boundary));
  for (const double p : {0.3, at, std::nextafter(at, 1.0)}) {
    CAPTURE(p);
    Generator g(seed);
    g.set_offset(offset);
    const auto mask = dropout(ones({n}), p, true, g).to_vector<float>();
    const auto keep = static_cast<float>(1.0 / (1.0 - p));
    for (std::int64_t i = 0; i < n; ++i) {
      CAPTURE(i);
      CHECK(mask[static_cast<std::size_t>(i)] == (uniform01(random_bits(seed, offset, i)) < p ? 0.f : keep));
    }
    if (p != 0.3) CHECK((mask[boundary] == 0.f) == (p > at));  // at its own draw kept, just above it dropped
  }
}

TEST_CASE("dropout keeps no mask for backward: it draws the same mask again from its counters", "[ch00][random]") {
  Tensor x = ones({64, 1024});
  x.set_requires_grad(true);
  Generator g(3);
  const std::size_t before = bytes_in_use(x.device());
  const Tensor y = dropout(x, 0.3, true, g);
  CHECK(bytes_in_use(x.device()) - before == test::bytes_of({64, 1024}, DType::float32, x.device()));  // the output
  sum(y).backward();
  CHECK(x.grad().to_vector<float>() == y.to_vector<float>());  // x is ones: both are the mask
}

TEST_CASE("dropout is the identity in eval mode and for p = 0; p = 1 zeroes", "[ch00][random]") {
  const Tensor x = from_vector(std::vector<double>{1, 2, 3}, {3});
  Generator g(1);
  CHECK(dropout(x, 0.5, false, g).is_same(x));
  CHECK(dropout(x, 0.0, true, g).is_same(x));
  CHECK(dropout(x, 1.0, true, g).to_vector<double>() == std::vector<double>{0, 0, 0});
}
