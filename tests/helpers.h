#pragma once
// Small helpers shared by the tests.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/autograd.h"

namespace stepformer::test {

// The message of a graded check that names one mistake: "mistake no-residual: seed 002's bug: ...". Each slug
// must be planted by a WRONG entry of the bug bank that expects "mistake SLUG", and a seed's name belongs only
// in the message of the check that detects that seed's bug (`exercises prove` enforces both;
// docs/exercises.md, "Messages that name a mistake").
inline std::string mistake(const std::string& slug, const std::string& words) {
  return "mistake " + slug + ": " + words;
}

// A float64 leaf with values drawn from U[low, high) (seeded: the same on every run).
inline Tensor f64_input(const Shape& shape, std::uint64_t seed, double low = -1.0, double high = 1.0) {
  Generator gen(seed);
  return uniform(shape, low, high, gen, {DType::float64, default_device(), true});
}

inline Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return from_vector(v, shape, {DType::float64, default_device(), false});
}

// The largest |a - b| over all elements; prints both when shapes differ.
inline double max_abs_diff(const Tensor& a, const std::vector<double>& expected) {
  const auto got = a.to_vector<double>();
  if (got.size() != expected.size()) return INFINITY;
  double m = 0;
  for (std::size_t i = 0; i < got.size(); ++i) m = std::max(m, std::abs(got[i] - expected[i]));
  return m;
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) { return max_abs_diff(a, b.to_vector<double>()); }

// max |actual - expected| over max |expected|: a difference in units of the expected tensor's largest value, for
// tolerances that scale with it (bfloat16's rounding is relative to the values rounded, not to each element). A NaN
// on one side only, or another shape, is infinitely off (std::max would skip a NaN).
inline double off_by_largest(const Tensor& actual, const Tensor& expected) {
  const auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  if (a.size() != e.size()) return INFINITY;
  double largest = 0, diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(e[i])) return INFINITY;
    if (!std::isnan(a[i])) diff = std::max(diff, std::abs(a[i] - e[i])), largest = std::max(largest, std::abs(e[i]));
  }
  return diff / largest;
}

// Empty when every |actual - expected| <= atol + rtol * |expected| and the shapes agree; else what differs:
// the shapes, the max difference, the NaN differences, the first values of both and the first difference
// (llm.c style). A NaN on one side only is a difference (on both sides too: no check here expects one).
inline std::string difference(const Tensor& actual, const Tensor& expected, double atol, double rtol) {
  const auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  const bool same_shape = actual.shape() == expected.shape() && a.size() == e.size();
  double worst = 0;
  std::size_t nans = 0, first_bad = a.size();
  for (std::size_t i = 0; same_shape && i < a.size(); ++i) {
    const double diff = std::abs(a[i] - e[i]);
    if (std::isnan(diff))
      ++nans;
    else
      worst = std::max(worst, diff);
    if ((std::isnan(diff) || diff > atol + rtol * std::abs(e[i])) && first_bad == a.size()) first_bad = i;
  }
  if (same_shape && first_bad == a.size()) return "";
  std::string out = "shapes " + to_string(actual.shape()) + " vs " + to_string(expected.shape());
  if (same_shape) out += ", max |diff| " + std::to_string(worst);
  if (nans) out += ", " + std::to_string(nans) + " NaN differences";
  out += ", first values (ours vs reference):";
  for (std::size_t i = 0; i < std::min<std::size_t>(std::min(a.size(), e.size()), 4); ++i)
    out += " (" + std::to_string(a[i]) + " vs " + std::to_string(e[i]) + ")";
  if (same_shape)
    out += ", first difference at flat index " + std::to_string(first_bad) + ": " + std::to_string(a[first_bad]) +
           " vs " + std::to_string(e[first_bad]);
  return out;
}

// True when difference() finds none; on failure the surrounding CHECK prints what differs.
inline bool close(const Tensor& actual, const Tensor& expected, double atol = 1e-5, double rtol = 1e-5) {
  const std::string d = difference(actual, expected, atol, rtol);
  if (!d.empty()) UNSCOPED_INFO(d);
  return d.empty();
}

// What one tensor of this shape and dtype costs on `device`, as bytes_in_use counts it (a device may round up):
// the unit of the tests that hold an op's graph to what it keeps for backward.
inline std::size_t bytes_of(const Shape& shape, DType dtype, Device device) {
  const std::size_t before = bytes_in_use(device);
  const Tensor t = empty(shape, {dtype, device});
  return bytes_in_use(device) - before;
}

// The audit for parameters a model forgets to register (seed 000 built a LayerNorm inside forward; docs/seeds.md):
// every tensor made to require grad while `build_and_run` builds a model and runs it must be one of the returned
// model's parameters. Returns the shapes of those that are not (empty: nothing forgotten).
template <class F>
std::vector<std::string> unregistered_leaves(F&& build_and_run) {
  LeafObserver observer;
  const auto model = build_and_run();  // a shared_ptr to the model, kept alive for the comparison
  const auto params = model->parameters();
  std::vector<std::string> missing;
  for (const auto& [leaf, shape] : observer.records()) {
    bool registered = false;
    for (const Tensor& p : params) registered |= leaf.defined() && p.is_same(leaf);
    if (!registered) missing.push_back(to_string(shape));
  }
  return missing;
}

}  // namespace stepformer::test

// Checks the exception's type and that its message contains every fragment.
#define REQUIRE_THROWS_WITH_ALL(expr, Type, ...)                                                           \
  do {                                                                                                     \
    bool thrown_ = false;                                                                                  \
    try {                                                                                                  \
      (void)(expr);                                                                                        \
    } catch (const Type& e_) {                                                                             \
      thrown_ = true;                                                                                      \
      const std::string msg_ = e_.what();                                                                  \
      INFO("message: " << msg_);                                                                           \
      for (const char* frag_ : {__VA_ARGS__}) CHECK_THAT(msg_, Catch::Matchers::ContainsSubstring(frag_)); \
    }                                                                                                      \
    if (!thrown_) FAIL("expected " #Type " from: " #expr);                                                 \
  } while (0)
