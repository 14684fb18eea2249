// Tensor handles, factories, views and element access.
#include "../helpers.h"

using namespace stepformer;
using stepformer::test::f64;

TEST_CASE("factories make the promised shapes, dtypes and values", "[ch00][tensor]") {
  const Tensor z = zeros({2, 3});
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.strides() == Shape{3, 1});
  CHECK(z.dtype() == DType::float32);
  CHECK(z.device() == kCPU);
  CHECK(z.to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(ones({2}, {DType::float64}).to_vector<double>() == std::vector<double>{1, 1});
  CHECK(full({2}, 7.5).to_vector<double>() == std::vector<double>{7.5, 7.5});
  CHECK(arange(2, 9, 3).to_vector<double>() == std::vector<double>{2, 5, 8});
  CHECK(arange(5, 0, -2, {DType::int64}).to_vector<std::int64_t>() == std::vector<std::int64_t>{5, 3, 1});
  CHECK(scalar(3.0).dim() == 0);
  CHECK(scalar(3.0).item() == 3.0);
  const std::int64_t huge = (std::int64_t{1} << 60) + 1;  // survives: no detour through double
  CHECK(from_vector(std::vector<std::int64_t>{huge}, {1}, {DType::int64}).to_vector<std::int64_t>()[0] == huge);
  CHECK(zeros({0, 3}).numel() == 0);
}

TEST_CASE("a Tensor is a handle: copies share storage", "[ch00][tensor]") {
  Tensor a = zeros({2});
  Tensor b = a;
  b.set({1}, 4.0);
  CHECK(a.at({1}) == 4.0);
  CHECK(a.is_same(b));
}

TEST_CASE("views share storage and never copy", "[ch00][tensor]") {
  Tensor base = arange(12, {DType::float64});
  Tensor m = view(base, {3, 4});
  Tensor t = transpose(m, 0, 1);
  CHECK(t.shape() == Shape{4, 3});
  CHECK(t.strides() == Shape{1, 4});
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.at({3, 2}) == 11.0);
  Tensor col = narrow(m, 1, 2, 1);  // [3, 1], offset 2
  CHECK(col.offset() == 2);
  CHECK(col.to_vector<double>() == std::vector<double>{2, 6, 10});
  Tensor every_other = slice(base, 0, 1, 12, 4);
  CHECK(every_other.to_vector<double>() == std::vector<double>{1, 5, 9});
  Tensor e = expand(unsqueeze(arange(3, {DType::float64}), 1), {3, 2});
  CHECK(e.strides() == Shape{1, 0});
  CHECK(e.to_vector<double>() == std::vector<double>{0, 0, 1, 1, 2, 2});
  CHECK(squeeze(view(base, {1, 12}), 0).shape() == Shape{12});
  CHECK(squeeze(view(base, {3, 4}), 0).shape() == Shape{3, 4});  // size != 1: unchanged, as torch
  m.set({0, 0}, -1.0);
  CHECK(base.at({0}) == -1.0);
  CHECK(bytes_in_use() >= 12 * sizeof(double));
}

TEST_CASE("view follows PyTorch's rule: splitting and merging contiguous runs", "[ch00][tensor]") {
  Tensor x = arange(24, {DType::float64});
  Tensor p = permute(view(x, {2, 3, 4}), {1, 0, 2});  // [3, 2, 4]: the last dim is still contiguous
  Tensor v = view(p, {3, 2, 2, 2});                   // splitting the contiguous last dim is a view
  CHECK(v.impl()->storage == x.impl()->storage);
  CHECK(v.at({2, 1, 1, 0}) == p.at({2, 1, 2}));
  REQUIRE_THROWS_AS(view(p, {6, 4}), ShapeError);  // merging dims 0 and 1 of p is not
  Tensor r = reshape(p, {6, 4});                   // ...so reshape copies
  CHECK(r.impl()->storage != x.impl()->storage);
  CHECK(r.at({5, 3}) == p.at({2, 1, 3}));
  CHECK(view(x, {-1, 6}).shape() == Shape{4, 6});
}

TEST_CASE("head split and merge round-trip exactly (seed 002's view-without-contiguous bug)", "[ch00][tensor]") {
  // [B, T, D] -> [B, H, T, Dh] -> [B, T, D]: the merge must make the permuted tensor contiguous.
  Generator g(1);
  const std::int64_t B = 2, T = 3, H = 2, Dh = 4;
  Tensor x = randn({B, T, H * Dh}, g);
  Tensor heads = permute(view(x, {B, T, H, Dh}), {0, 2, 1, 3});
  Tensor merged = reshape(permute(heads, {0, 2, 1, 3}), {B, T, H * Dh});
  CHECK(merged.to_vector<float>() == x.to_vector<float>());
}

TEST_CASE("contiguous copies only when needed", "[ch00][tensor]") {
  Tensor a = ones({2, 3});
  CHECK(contiguous(a).is_same(a));
  Tensor t = transpose(a, 0, 1);
  Tensor c = contiguous(t);
  CHECK(c.is_contiguous());
  CHECK_FALSE(c.is_same(t));
}

TEST_CASE("cat and stack", "[ch00][tensor]") {
  const Tensor a = f64({1, 2, 3, 4}, {2, 2}), b = f64({5, 6}, {2, 1});
  CHECK(cat({a, b}, 1).to_vector<double>() == std::vector<double>{1, 2, 5, 3, 4, 6});
  CHECK(cat({a, transpose(a, 0, 1)}, 0).to_vector<double>() == std::vector<double>{1, 2, 3, 4, 1, 3, 2, 4});
  const Tensor s = stack({f64({1, 2}, {2}), f64({3, 4}, {2})}, 1);
  CHECK(s.shape() == Shape{2, 2});
  CHECK(s.to_vector<double>() == std::vector<double>{1, 3, 2, 4});
}

TEST_CASE("dtype conversion and comparisons", "[ch00][tensor]") {
  const Tensor x = f64({-1.5, 0.0, 2.7}, {3});
  CHECK(x.to(DType::int64).to_vector<std::int64_t>() == std::vector<std::int64_t>{-1, 0, 2});
  const Tensor pos = gt(x, zeros({1}, {DType::float64}));
  CHECK(pos.dtype() == DType::boolean);
  CHECK(pos.to_vector<double>() == std::vector<double>{0, 0, 1});
  CHECK(logical_not(pos).to_vector<double>() == std::vector<double>{1, 1, 0});
  const Tensor col = from_vector(std::vector<double>{1, 0}, {2, 1}, {DType::boolean});
  CHECK(logical_or(col, pos).to_vector<double>() == std::vector<double>{1, 1, 1, 0, 0, 1});
  CHECK(eq(x, x).to_vector<double>() == std::vector<double>{1, 1, 1});
  CHECK(lt(x, x).to_vector<double>() == std::vector<double>{0, 0, 0});
  CHECK(ne(x, zeros({3}, {DType::float64})).to_vector<double>() == std::vector<double>{1, 0, 1});
}

TEST_CASE("integer tensors: arithmetic, sums, no gradients", "[ch00][tensor]") {
  const Tensor i = arange(4, {DType::int64});
  CHECK((i + i).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 2, 4, 6});
  CHECK(sum(i).item() == 6.0);
  CHECK(sum(i).dtype() == DType::int64);
  REQUIRE_THROWS_AS(i / i, DTypeError);
}

TEST_CASE("the tests' close(): a NaN on one side is a difference, reported as one, with the first difference") {
  const Tensor ours = test::f64({1, NAN, 3}, {3}), reference = test::f64({1, 1, 3}, {3});
  CHECK_FALSE(test::close(ours, reference));
  const std::string d = test::difference(ours, reference, 1e-5, 1e-5);
  CHECK_THAT(d, Catch::Matchers::ContainsSubstring("1 NaN differences"));
  CHECK_THAT(d, Catch::Matchers::ContainsSubstring("first difference at flat index 1: nan vs 1.000000"));
  CHECK(test::difference(reference, reference, 0, 0).empty());
  CHECK_THAT(test::difference(test::f64({1, 2.5, 3}, {3}), reference, 1e-5, 1e-5),
             Catch::Matchers::ContainsSubstring("max |diff| 1.5"));
}
