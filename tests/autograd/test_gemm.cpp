// The CPU GEMM: every micro-kernel this CPU can run against the reference backend's triple loop, on odd sizes,
// transposed and strided operands, alpha/beta, one and two threads.
#include <algorithm>
#include <catch2/catch_template_test_macros.hpp>
#include <cstring>
#include <random>

#include "../helpers.h"
#include "cpu/gemm.h"
#include "cpu/gemm_isa.h"
#include "cpu/gemm_pack.h"

using namespace stepformer;
using namespace stepformer::cpu;

namespace {

template <class T>
std::vector<T> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(u(rng));
  return v;
}

// C = alpha * A @ B + beta * C by the reference backend's triple loop (backends/reference/gemm.cpp), on the
// same host memory: a reference kernel reads raw strided memory like any other.
template <class T>
TensorDesc matrix(const T* data, std::int64_t rows, std::int64_t cols, std::int64_t row_stride,
                  std::int64_t col_stride) {
  TensorDesc d;
  d.data = const_cast<T*>(data);
  d.dtype = std::is_same_v<T, float> ? DType::float32 : DType::float64;
  d.ndim = 2;
  d.shape[0] = rows, d.shape[1] = cols;
  d.strides[0] = row_stride, d.strides[1] = col_stride;
  return d;
}
template <class T>
void reference(std::int64_t M, std::int64_t N, std::int64_t K, T alpha, MatrixView<const T> a, MatrixView<const T> b,
               T beta, MatrixView<T> c) {
  backend_for(Device{DeviceType::reference, 0})
      .gemm(matrix<T>(c.data, M, N, c.row_stride, c.col_stride), matrix<T>(a.data, M, K, a.row_stride, a.col_stride),
            matrix<T>(b.data, K, N, b.row_stride, b.col_stride), alpha, beta);
}

}  // namespace

TEMPLATE_TEST_CASE("every GEMM micro-kernel matches the reference on odd sizes and any strides", "[gemm]", float,
                   double) {
  using T = TestType;
  const auto& kernels = gemm_kernels<T>();
  REQUIRE(!kernels.empty());
  CHECK(kernels.front().name == "portable");
  // float: each output sums K products of values in [-1, 1]; the blocked order differs from the
  // reference's, so allow K ulps of the sum's scale. double: the same with its own epsilon.
  const double eps = std::is_same_v<T, float> ? 1.2e-7 : 2.3e-16;
  // The reference once per problem (under the sanitizers its triple loop is most of the test's time), then every
  // kernel on one and two threads against it.
  for (const std::int64_t M : {1, 7, 33, 65, 257})
    for (const std::int64_t N : {1, 7, 33, 65, 257})
      for (const std::int64_t K : {1, 7, 65, 257}) {
        if (M * N * K > 257 * 65 * 257) continue;  // keep the test fast; 257^3 runs below
        for (const bool trans_a : {false, true})
          for (const bool trans_b : {false, true}) {
            const auto av = random_values<T>(M * K, 1), bv = random_values<T>(K * N, 2);
            const MatrixView<const T> a{av.data(), trans_a ? 1 : K, trans_a ? M : 1};
            const MatrixView<const T> b{bv.data(), trans_b ? 1 : N, trans_b ? K : 1};
            // C with a row stride larger than N (a view into a wider matrix); beta != 0 reads it.
            auto got = random_values<T>(M * (N + 3), 3), want = got;
            const T alpha = T(0.5), beta = (M + N) % 2 ? T(0) : T(-2);
            reference<T>(M, N, K, alpha, a, b, beta, {want.data(), N + 3, 1});
            for (const auto& kernel : kernels)
              for (const int threads : {1, 2}) {
                INFO(kernel.name << " M=" << M << " N=" << N << " K=" << K << " trans_a=" << trans_a
                                 << " trans_b=" << trans_b << " threads=" << threads);
                auto g = got;
                gemm<T>(M, N, K, alpha, a, b, beta, {g.data(), N + 3, 1}, threads, &kernel);
                double worst = 0;
                for (std::size_t i = 0; i < g.size(); ++i)
                  worst = std::max(worst, std::abs(static_cast<double>(g[i]) - static_cast<double>(want[i])));
                CHECK(worst <= 2.0 * static_cast<double>(K) * eps + 4 * eps);
              }
          }
      }
}

TEMPLATE_TEST_CASE("every GEMM micro-kernel reads a row-major A in place as it reads a packed panel: the same bits",
                   "[gemm]", float, double) {
  // gemm() reads A in place for some shapes on the last kernel only: here every kernel's run_rows, against its run
  // on the same values packed, with full and short tiles (rows from m on repeat row m - 1, never read past A, and
  // C's rows from m on are left as they were: gemm() stores a short last row panel into C itself).
  using T = TestType;
  for (const auto& kernel : gemm_kernels<T>())
    for (const std::int64_t K : {1, 7, 65}) {
      const int mr = kernel.mr, nr = kernel.nr;
      const std::int64_t lda = K + 3;
      const auto rows = random_values<T>(static_cast<std::size_t>(mr * lda), 6);
      const auto panel_b = random_values<T>(static_cast<std::size_t>(K * nr), 7);
      for (const int m : {mr, std::max(1, mr - 3)}) {
        std::vector<T> packed(static_cast<std::size_t>(K * mr));
        for (std::int64_t k = 0; k < K; ++k)
          for (int r = 0; r < mr; ++r) packed[k * mr + r] = rows[std::min(r, m - 1) * lda + k];
        std::vector<T> want(static_cast<std::size_t>(mr * nr), T(1)), got = want;
        kernel.run(K, packed.data(), panel_b.data(), want.data(), nr, T(0.5), T(-1));
        kernel.run_rows(K, rows.data(), lda, m, panel_b.data(), got.data(), nr, T(0.5), T(-1));
        INFO(kernel.name << " K=" << K << " m=" << m);
        CHECK(std::vector<T>(got.begin(), got.begin() + m * nr) == std::vector<T>(want.begin(), want.begin() + m * nr));
        CHECK(std::all_of(got.begin() + m * nr, got.end(), [](T x) { return x == T(1); }));
      }
    }
}

TEMPLATE_TEST_CASE("GEMM: 257^3, C with column stride, beta == 0 never reads C, empty sizes", "[gemm]", float, double) {
  using T = TestType;
  const std::int64_t n = 257;
  const auto av = random_values<T>(n * n, 4), bv = random_values<T>(n * n, 5);
  std::vector<T> got(n * n * 2, std::numeric_limits<T>::quiet_NaN()), want(n * n);
  // C transposed and spread: element (i, j) at 2 * (j * n + i). NaN in C must not leak through beta = 0.
  gemm<T>(n, n, n, T(1), {av.data(), n, 1}, {bv.data(), n, 1}, T(0), {got.data(), 2, 2 * n});
  reference<T>(n, n, n, T(1), {av.data(), n, 1}, {bv.data(), n, 1}, T(0), {want.data(), n, 1});
  double worst = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      worst = std::max(worst, std::abs(static_cast<double>(got[2 * (j * n + i)] - want[i * n + j])));
  CHECK(worst < (std::is_same_v<T, float> ? 1e-4 : 1e-12));

  std::vector<T> c{T(3)};
  gemm<T>(1, 1, 0, T(1), {av.data(), 0, 1}, {bv.data(), 1, 1}, T(2), {c.data(), 1, 1});  // K = 0: C = beta * C
  CHECK(c[0] == T(6));
  gemm<T>(0, 5, 5, T(1), {av.data(), 5, 1}, {bv.data(), 5, 1}, T(0), {c.data(), 5, 1});  // M = 0: nothing
  CHECK(c[0] == T(6));
}

TEST_CASE("GEMM results do not depend on the thread count", "[gemm]") {
  // Each element's k sum runs in the same order whatever the thread count (threads split rows and
  // column panels, never k), so 1 and 2 threads give bit-identical results.
  const std::int64_t M = 300, N = 200, K = 700;
  const auto av = random_values<float>(M * K, 6), bv = random_values<float>(K * N, 7);
  std::vector<float> one(M * N), two(M * N);
  gemm<float>(M, N, K, 1.f, {av.data(), K, 1}, {bv.data(), N, 1}, 0.f, {one.data(), N, 1}, 1);
  gemm<float>(M, N, K, 1.f, {av.data(), K, 1}, {bv.data(), N, 1}, 0.f, {two.data(), N, 1}, 2);
  CHECK(one == two);
}

TEMPLATE_TEST_CASE("GEMM: small products take the direct path and agree with the reference", "[gemm]", float, double) {
  using T = TestType;
  const double eps = std::is_same_v<T, float> ? 1.2e-7 : 2.3e-16;
  for (const std::int64_t M : {1, 7, 16, 33})
    for (const std::int64_t N : {1, 16, 33})
      for (const std::int64_t K : {1, 32, 57})
        for (const bool trans_b : {false, true}) {
          INFO("M=" << M << " N=" << N << " K=" << K << " trans_b=" << trans_b);
          const auto av = random_values<T>(M * K, 8), bv = random_values<T>(K * N, 9);
          const MatrixView<const T> a{av.data(), 1, M};  // A transposed
          const MatrixView<const T> b{bv.data(), trans_b ? 1 : N, trans_b ? K : 1};
          auto got = random_values<T>(M * N * 2, 10), want = got;
          gemm<T>(M, N, K, T(1.5), a, b, T(0.5), {got.data(), 1, 2 * M});  // C transposed, every other column
          reference<T>(M, N, K, T(1.5), a, b, T(0.5), {want.data(), 1, 2 * M});
          double worst = 0;
          for (std::size_t i = 0; i < got.size(); ++i)
            worst = std::max(worst, std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
          CHECK(worst <= 4.0 * static_cast<double>(K) * eps + 4 * eps);
        }
}

// A of at most 4 rows (a decode step) skips packing (gemm_thin.cpp): B read along k when it is a transposed
// weight, along n otherwise; columns past one 256-column chunk; A row-major (the dot-product path) and
// transposed; C strided; one and many threads (the columns split between them).
TEMPLATE_TEST_CASE("GEMM: thin products (M <= 4) agree with the reference, B either way", "[gemm]", float, double) {
  using T = TestType;
  const double eps = std::is_same_v<T, float> ? 1.2e-7 : 2.3e-16;
  for (const std::int64_t M : {1, 2, 4})
    for (const std::int64_t N : {1, 300, 1100})
      for (const std::int64_t K : {1, 33, 1000})
        for (const bool trans_a : {false, true})
          for (const bool trans_b : {false, true}) {
            const auto av = random_values<T>(M * K, 14), bv = random_values<T>(K * N, 15);
            const MatrixView<const T> a{av.data(), trans_a ? 1 : K, trans_a ? M : 1};
            const MatrixView<const T> b{bv.data(), trans_b ? 1 : N, trans_b ? K : 1};
            const auto before = random_values<T>(M * N * 2, 16);
            auto want = before;
            reference<T>(M, N, K, T(1.5), a, b, T(0.5), {want.data(), 2 * N, 2});
            for (const int threads : {1, 2}) {
              INFO("M=" << M << " N=" << N << " K=" << K << " trans_a=" << trans_a << " trans_b=" << trans_b
                        << " threads=" << threads);
              auto got = before;
              gemm<T>(M, N, K, T(1.5), a, b, T(0.5), {got.data(), 2 * N, 2}, threads);
              double worst = 0;
              for (std::size_t i = 0; i < got.size(); ++i)
                worst = std::max(worst, std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
              CHECK(worst <= 4.0 * static_cast<double>(K) * eps + 4 * eps);
            }
          }
}

// A row-major A with a short K is read in place and B packed kInPlaceBBytes at a time: a B wider than that (the
// base model's output layer) is multiplied block after block, the last block and its last panel short. float32
// against the reference, bfloat16 (the vdpbf16ps kernel where the CPU has it) against a double sum.
TEST_CASE("GEMM reading A in place: a B wider than one block of packed panels agrees with the reference", "[gemm]") {
  const std::int64_t M = 30, K = 256;
  for (const int threads : {1, 2}) {
    INFO("threads=" << threads);
    {
      // float32: a k block of the last kernel's kc (or all of K) values, of 4 bytes, per packed column
      const std::int64_t N = kInPlaceBBytes / (std::min(gemm_kernels<float>().back().kc, K) * 4) + 69;
      const auto av = random_values<float>(M * K, 17), bv = random_values<float>(K * N, 18);
      std::vector<float> got(M * N), want(M * N);
      gemm<float>(M, N, K, 1.f, {av.data(), K, 1}, {bv.data(), N, 1}, 0.f, {got.data(), N, 1}, threads);
      reference<float>(M, N, K, 1.f, {av.data(), K, 1}, {bv.data(), N, 1}, 0.f, {want.data(), N, 1});
      double worst = 0;
      for (std::size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
      CHECK(worst <= 4.0 * K * 1.2e-7);
    }
    {
      const std::int64_t N = kInPlaceBBytes / (K * 2) + 69;  // bfloat16: K / 2 pairs of 4 bytes per packed column
      const auto af = random_values<float>(M * K, 19), bf = random_values<float>(K * N, 20);
      std::vector<bfloat16> av(af.begin(), af.end()), bv(bf.begin(), bf.end());
      std::vector<float> got(M * N);
      gemm<float, bfloat16>(M, N, K, 1.f, {av.data(), K, 1}, {bv.data(), N, 1}, 0.f, {got.data(), N, 1}, threads);
      double worst = 0;
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j) {
          double sum = 0;
          for (std::int64_t k = 0; k < K; ++k)
            sum += static_cast<double>(static_cast<float>(av[i * K + k])) *
                   static_cast<double>(static_cast<float>(bv[k * N + j]));
          worst = std::max(worst, std::abs(static_cast<double>(got[i * N + j]) - sum));
        }
      CHECK(worst <= 2.0 * K * 1.2e-7);
    }
  }
}

namespace {

// Element (i, j) of A B summed in double from A's and B's bfloat16 values (each exact in float32 and double).
double double_sum(const MatrixView<const bfloat16>& a, const MatrixView<const bfloat16>& b, std::int64_t i,
                  std::int64_t j, std::int64_t K) {
  double sum = 0;
  for (std::int64_t k = 0; k < K; ++k)
    sum += static_cast<double>(static_cast<float>(a.data[i * a.row_stride + k * a.col_stride])) *
           static_cast<double>(static_cast<float>(b.data[k * b.row_stride + j * b.col_stride]));
  return sum;
}

}  // namespace

// bfloat16 A and B, float32 C (chapter 11): gemm's own choice, each dot-product kernel this CPU has by name
// (avx512_bf16 with AVX512_BF16, amx_bf16 with AMX), and every float32 kernel on widened operands (the fallback,
// which naming a float32 kernel forces) against a double sum of the same bfloat16 values. Odd K leaves half a pair,
// whose zero must add nothing (AMX pads K to 32 values); K past one k block (2048 values) adds a second block onto
// the first; a row-major A whose K is whole steps (even; AMX: 32) is read in place where it pays (its last row
// panel short: rows past M must not be read); small products too; M of 32 and 64 fill AMX's tiles exactly.
TEST_CASE("bfloat16 GEMM: the dot-product kernels and the widened fallback match a double sum", "[gemm][bf16]") {
  struct Kernel {
    const GemmKernel<float>* widened;  // a float32 kernel on widened operands, or null
    std::string dot;                   // a dot-product kernel by name, or empty (both empty: gemm's own choice)
  };
  std::vector<Kernel> kernels{{nullptr, ""}};
  for (const auto& k : gemm_kernels<float>()) kernels.push_back({&k, ""});
  for (const auto& name : bf16_dot_kernels()) kernels.push_back({nullptr, name});
  const char* dot = bf16_dot_kernel();
  INFO("the default bfloat16 kernel on this CPU: " << (dot ? dot : "none (no AVX512_BF16): the widened fallback"));
  struct Shape {
    std::int64_t M, N, K;
  };
  const Shape shapes[] = {{3, 257, 1},    {29, 300, 2},   {65, 33, 65},   {15, 40, 257},  {33, 65, 258},
                          {15, 40, 2051}, {300, 33, 512}, {29, 64, 4100}, {7, 16, 32},    {1, 700, 300},
                          {32, 32, 32},   {64, 96, 64},   {70, 40, 96},   {45, 200, 2112}};
  // alpha 1 with beta 0 or 1 are AMX's direct stores (C itself is its accumulators' first and last value); each
  // shape's four layouts take the four pairs in turn.
  const std::pair<float, float> scalings[] = {{0.5f, 0.f}, {0.5f, -2.f}, {1.f, 0.f}, {1.f, 1.f}};
  for (const Shape& shape : shapes)
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true}) {
        const auto [M, N, K] = shape;
        const auto [alpha, beta] = scalings[(&shape - shapes + 2 * trans_a + trans_b) % 4];
        std::vector<bfloat16> av(M * K), bv(K * N);
        const auto af = random_values<float>(M * K, 11), bf = random_values<float>(K * N, 12);
        for (std::size_t i = 0; i < av.size(); ++i) av[i] = bfloat16(af[i]);
        for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = bfloat16(bf[i]);
        const MatrixView<const bfloat16> a{av.data(), trans_a ? 1 : K, trans_a ? M : 1};
        const MatrixView<const bfloat16> b{bv.data(), trans_b ? 1 : N, trans_b ? K : 1};
        const auto c0 = random_values<float>(M * (N + 3), 13);
        std::vector<double> want(M * N);  // the same for every kernel and thread count: summed once
        for (std::int64_t i = 0; i < M; ++i)
          for (std::int64_t j = 0; j < N; ++j)
            want[i * N + j] = alpha * double_sum(a, b, i, j, K) + (beta == 0 ? 0.0 : beta * c0[i * (N + 3) + j]);
        for (const auto& kernel : kernels)
          for (const int threads : {1, 2}) {
            INFO("alpha=" << alpha << " beta=" << beta << " threads=" << threads);
            INFO((kernel.widened       ? kernel.widened->name
                  : kernel.dot.empty() ? std::string("default")
                                       : kernel.dot)
                 << " M=" << M << " N=" << N << " K=" << K << " trans_a=" << trans_a << " trans_b=" << trans_b);
            auto got = c0;
            gemm<float, bfloat16>(M, N, K, alpha, a, b, beta, {got.data(), N + 3, 1}, threads, kernel.widened,
                                  kernel.dot.empty() ? nullptr : kernel.dot.c_str());
            double worst = 0;
            for (std::int64_t i = 0; i < M; ++i)
              for (std::int64_t j = 0; j < N; ++j)
                worst = std::max(worst, std::abs(static_cast<double>(got[i * (N + 3) + j]) - want[i * N + j]));
            CHECK(worst <= 2.0 * static_cast<double>(K) * 1.2e-7 + 4 * 1.2e-7);
          }
      }
}

// The fallback widens bfloat16 operands block by block and hands the float32 kernel the same layouts a float32
// operand has (widened() in gemm_scratch.h): its product is then gemm<float, float>'s on the widened values, bit for
// bit, through every path that product takes: the direct loop (small, B row-major), A read in place (a small product
// with a transposed B, a short K, a thin N with K past one k block) and the blocked loop (K past one k block,
// transposed A); not a thin A (M <= 4: its sums are split into vector lanes as the compiler vectorises each type's
// loop, and the test above holds it to a double sum). gemm's own choice is the fallback only where this CPU has no dot
// kernel (the suite runs this test again with STEPFORMER_NO_BF16_DOT set, tests/CMakeLists.txt); a named float32 kernel
// always is.
TEST_CASE("bfloat16 GEMM without a dot kernel: the float32 GEMM's bits on the widened operands", "[gemm][bf16]") {
  std::vector<const GemmKernel<float>*> kernels;
  if (!bf16_dot_kernel()) kernels.push_back(nullptr);
  for (const auto& k : gemm_kernels<float>()) kernels.push_back(&k);
  struct Shape {
    std::int64_t M, N, K;
  };
  const Shape shapes[] = {{16, 16, 32},   {29, 64, 40},    {70, 40, 96},  {65, 300, 256},
                          {30, 40, 1500}, {45, 200, 2112}, {128, 96, 700}};
  for (const Shape& shape : shapes)
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true}) {
        const auto [M, N, K] = shape;
        const auto af = random_values<float>(M * K, 51), bf = random_values<float>(K * N, 52);
        const std::vector<bfloat16> av(af.begin(), af.end()), bv(bf.begin(), bf.end());
        const std::vector<float> aw(av.begin(), av.end()), bw(bv.begin(), bv.end());  // widened: exact
        const std::int64_t rs_a = trans_a ? 1 : K, cs_a = trans_a ? M : 1, rs_b = trans_b ? 1 : N,
                           cs_b = trans_b ? K : 1;
        for (const GemmKernel<float>* kernel : kernels)
          for (const int threads : {1, 2}) {
            INFO((kernel ? kernel->name : std::string("default"))
                 << " M=" << M << " N=" << N << " K=" << K << " trans_a=" << trans_a << " trans_b=" << trans_b
                 << " threads=" << threads);
            std::vector<float> got(M * N), want(M * N);
            gemm<float, bfloat16>(M, N, K, 0.5f, {av.data(), rs_a, cs_a}, {bv.data(), rs_b, cs_b}, 0.f,
                                  {got.data(), N, 1}, threads, kernel);
            gemm<float, float>(M, N, K, 0.5f, {aw.data(), rs_a, cs_a}, {bw.data(), rs_b, cs_b}, 0.f,
                               {want.data(), N, 1}, threads, kernel);
            CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
          }
      }
}

// A bfloat16 product (autocast's): with beta 0, every value is gemm<float, bfloat16>'s float32 product with the same
// kernel rounded once, bit for bit, whether the tile is rounded as the kernel leaves it (K in one block) or a float32
// buffer is rounded after (K past 2048, thin and small products), and C is not read (it starts as NaN). With beta,
// within the float32 sums and one rounding of a double sum of the same values.
TEST_CASE("bfloat16 GEMM with a bfloat16 product: the float32 product rounded once, C unread without beta",
          "[gemm][bf16]") {
  std::vector<std::string> dots{""};
  for (const auto& name : bf16_dot_kernels()) dots.push_back(name);
  struct Shape {
    std::int64_t M, N, K;
  };
  const Shape shapes[] = {{64, 96, 256},  {70, 40, 96},  {45, 200, 688}, {3, 257, 64},
                          {15, 40, 2051}, {33, 65, 258}, {128, 96, 1024}};
  for (const Shape& shape : shapes)
    for (const auto& dot : dots)
      for (const bool trans_a : {false, true})
        for (const bool trans_b : {false, true})
          for (const auto& [alpha, beta] : {std::pair{1.f, 0.f}, {0.5f, 0.f}, {0.5f, -2.f}})
            for (const int threads : {1, 2}) {
              const auto [M, N, K] = shape;
              INFO((dot.empty() ? std::string("default") : dot)
                   << " M=" << M << " N=" << N << " K=" << K << " trans_a=" << trans_a << " trans_b=" << trans_b
                   << " alpha=" << alpha << " beta=" << beta << " threads=" << threads);
              const auto af = random_values<float>(M * K, 41), bf = random_values<float>(K * N, 42),
                         cf = random_values<float>(M * N, 43);
              const std::vector<bfloat16> av(af.begin(), af.end()), bv(bf.begin(), bf.end());
              const MatrixView<const bfloat16> a{av.data(), trans_a ? 1 : K, trans_a ? M : 1};
              const MatrixView<const bfloat16> b{bv.data(), trans_b ? 1 : N, trans_b ? K : 1};
              std::vector<bfloat16> got(M * N, bfloat16::from_bits(0x7FC0));  // NaN: must not be read at beta 0
              if (beta != 0)
                for (std::int64_t e = 0; e < M * N; ++e) got[e] = bfloat16(cf[e]);
              const std::vector<bfloat16> c0 = got;
              const char* name = dot.empty() ? nullptr : dot.c_str();
              gemm_rounded(M, N, K, alpha, a, b, beta, {got.data(), N, 1}, threads, name);
              if (beta == 0) {
                std::vector<float> wide(M * N);
                gemm<float, bfloat16>(M, N, K, alpha, a, b, 0.f, {wide.data(), N, 1}, threads, nullptr, name);
                std::int64_t differ = 0;
                for (std::int64_t e = 0; e < M * N; ++e) differ += got[e].bits != bfloat16(wide[e]).bits;
                CHECK(differ == 0);
                continue;
              }
              double worst = 0;
              for (std::int64_t i = 0; i < M; ++i)
                for (std::int64_t j = 0; j < N; ++j) {
                  const double want =
                      alpha * double_sum(a, b, i, j, K) + beta * static_cast<double>(static_cast<float>(c0[i * N + j]));
                  const double tol = std::abs(want) / 256 + 2.0 * static_cast<double>(K) * 1.2e-7 + 1e-6;
                  worst =
                      std::max(worst, std::abs(static_cast<double>(static_cast<float>(got[i * N + j])) - want) / tol);
                }
              CHECK(worst <= 1.0);
            }
}

// Each thread configures AMX's tiles before its first tile instruction of a product, and only then: a thread that
// runs a tile instruction unconfigured dies of SIGILL. A thread starts with the tiles of the thread that created it
// (Linux copies the register state), so OpenMP's threads may start configured; other code may release them in
// between (oneDNN does after each of its products), which is what this test does to every thread first.
TEST_CASE("AMX: a product after other code released every thread's tiles configures them again", "[gemm][bf16]") {
  const auto kernels = bf16_dot_kernels();
  if (std::find(kernels.begin(), kernels.end(), "amx_bf16") == kernels.end())
    SKIP("this CPU has no AMX (or Linux did not grant its tile state, or STEPFORMER_NO_AMX is set)");
#if defined(__x86_64__)
  const std::int64_t M = 96, N = 200, K = 2112;  // two threads' work (a block of rows each), K in two blocks
  const auto af = random_values<float>(M * K, 31), bf = random_values<float>(K * N, 32);
  const std::vector<bfloat16> av(af.begin(), af.end()), bv(bf.begin(), bf.end());
  std::vector<float> before(M * N), after(M * N);
  auto multiply = [&](std::vector<float>& c) {
    gemm<float, bfloat16>(M, N, K, 1.f, {av.data(), K, 1}, {bv.data(), N, 1}, 0.f, {c.data(), N, 1}, 2, nullptr,
                          "amx_bf16");
  };
  multiply(before);
#pragma omp parallel num_threads(2)
  asm volatile("tilerelease");
  multiply(after);
  CHECK(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)) == 0);
#endif
}

namespace {

// Packs with a kernel's own packing and with gemm_pack.h's portable loops into buffers with 16 words to spare, and
// checks that both wrote the same bits everywhere: B as kc rows from k0 and n columns from column 5, row-major,
// transposed and neither (a stride of 2 both ways); A as mc rows from row 7, column-major and row-major; odd k (a
// bfloat16 pair's high half zero), panels cut short by the edge (their zeros), offsets into a padded operand.
// `per` is how many k one packed word holds (2: bfloat16 pairs). pack_b(b, k0, kc, j0, n, dst, ld),
// pack_a(a, i0, mc, k0, kc, dst). Where `several_panels`, pack_b is also given up to three panels' columns in one
// call, their panels `ld` = 5 rows further apart than they are long: both packings must then write what the
// portable packing writes one panel at a time, panel after panel, and leave the gaps alone.
template <class W, class E, class PackB, class PortableB, class PackA, class PortableA>
void check_packing(const std::vector<E>& mem, std::int64_t cols, int mr, int nr, int per, bool several_panels,
                   PackB pack_b, PortableB portable_b, PackA pack_a, PortableA portable_a) {
  auto same = [](auto pack_fast, auto pack_portable, std::int64_t words) {
    std::vector<W> fast(static_cast<std::size_t>(words) + 16), portable(fast.size());
    std::memset(fast.data(), 0xA5, fast.size() * sizeof(W));  // untouched words keep this pattern
    std::memset(portable.data(), 0xA5, portable.size() * sizeof(W));
    pack_fast(fast.data());
    pack_portable(portable.data());
    CHECK(std::memcmp(fast.data(), portable.data(), fast.size() * sizeof(W)) == 0);
  };
  for (const std::int64_t kc : {1, 2, 7, 64, 257})
    for (const std::int64_t k0 : {0, 3}) {
      const std::int64_t kp = (kc + per - 1) / per;
      std::vector<std::int64_t> widths{1, 15, 16, 17, 31, 32};
      if (several_panels) widths.insert(widths.end(), {nr + 1, 2 * nr + 7});
      for (const std::int64_t n : widths)
        for (const int layout : {0, 1, 2}) {
          const MatrixView<const E> b = layout == 0   ? MatrixView<const E>{mem.data(), cols, 1}
                                        : layout == 1 ? MatrixView<const E>{mem.data(), 1, cols}
                                                      : MatrixView<const E>{mem.data(), cols + 1, 2};
          INFO("B layout " << layout << " kc=" << kc << " k0=" << k0 << " n=" << n);
          const std::int64_t ld = (kp + (several_panels ? 5 : 0)) * nr;
          const auto panel_by_panel = [&](W* d) {
            for (std::int64_t j = 0; j < n; j += nr, d += ld)
              portable_b(b, k0, kc, 5 + j, std::min(n - j, std::int64_t{nr}), d, ld);
          };
          const std::int64_t words = (n + nr - 1) / nr * ld;
          same([&](W* d) { pack_b(b, k0, kc, 5, n, d, ld); }, panel_by_panel, words);
          if (n > nr) same([&](W* d) { portable_b(b, k0, kc, 5, n, d, ld); }, panel_by_panel, words);
        }
      for (const std::int64_t mc : {1, 13, 14, 15, 29, 98})
        for (const bool column_major : {true, false}) {
          const MatrixView<const E> a =
              column_major ? MatrixView<const E>{mem.data(), 1, cols} : MatrixView<const E>{mem.data(), cols, 1};
          INFO("A column-major " << column_major << " kc=" << kc << " k0=" << k0 << " mc=" << mc);
          same([&](W* d) { pack_a(a, 7, mc, k0, kc, d); }, [&](W* d) { portable_a(a, 7, mc, k0, kc, d); },
               (mc + mr - 1) / mr * kp * mr);
        }
    }
}

// The operand both tests pack: element (i, j) of every view above lies within 300 x 301.
constexpr std::int64_t kPackRows = 300, kPackCols = 301;

}  // namespace

// The vdpbf16ps kernel's packing in AVX-512 (gemm_avx512bf16.cpp), word for word.
TEST_CASE("bfloat16 packing in AVX-512 writes the portable packing's words, and nothing past them", "[gemm][bf16]") {
#if defined(__x86_64__)
  if (!bf16_dot_kernel()) SKIP("this CPU has no AVX512_BF16 (or STEPFORMER_NO_BF16_DOT is set)");
  const gemm_detail::MicroKernelBf16 dot = gemm_detail::avx512_bf16();
  const auto values = random_values<float>(kPackRows * kPackCols, 21);
  const std::vector<bfloat16> mem(values.begin(), values.end());
  using View = MatrixView<const bfloat16>;
  check_packing<std::uint32_t>(
      mem, kPackCols, dot.mr, dot.nr, 2, false,
      [&](const View& b, auto k0, auto kc, auto j0, auto n, std::uint32_t* d, std::int64_t) {
        dot.pack_b(b, k0, kc, j0, n, dot.nr, d);  // one panel a call: no ld
      },
      [&](const View& b, auto k0, auto kc, auto j0, auto n, std::uint32_t* d, std::int64_t) {
        gemm_detail::pack_b_pairs(b, k0, kc, j0, n, dot.nr, d);
      },
      [&](const View& a, auto i0, auto mc, auto k0, auto kc, std::uint32_t* d) {
        dot.pack_a(a, i0, mc, k0, kc, dot.mr, d);
      },
      [&](const View& a, auto i0, auto mc, auto k0, auto kc, std::uint32_t* d) {
        gemm_detail::pack_a_pairs(a, i0, mc, k0, kc, dot.mr, d);
      });
#else
  SKIP("AVX-512 packing exists on x86-64 only");
#endif
}

// The float32 kernels' own packing (gemm_avx512.cpp), value for value (bits), B several panels at a time too.
TEST_CASE("float32 packing in a kernel's instruction set writes the portable packing's values, and nothing past them",
          "[gemm]") {
  const auto mem = random_values<float>(kPackRows * kPackCols, 22);
  using View = MatrixView<const float>;
  int kernels_with_packing = 0;
  for (const auto& kernel : gemm_kernels<float>()) {
    if (!kernel.pack_a || !kernel.pack_b) continue;
    ++kernels_with_packing;
    INFO(kernel.name);
    check_packing<float>(
        mem, kPackCols, kernel.mr, kernel.nr, 1, true,
        [&](const View& b, auto k0, auto kc, auto j0, auto n, float* d, std::int64_t ld) {
          kernel.pack_b(b, k0, kc, j0, n, kernel.nr, d, ld);
        },
        [&](const View& b, auto k0, auto kc, auto j0, auto n, float* d, std::int64_t ld) {
          gemm_detail::pack_b_panels(b, k0, kc, j0, n, kernel.nr, d, ld);
        },
        [&](const View& a, auto i0, auto mc, auto k0, auto kc, float* d) {
          kernel.pack_a(a, i0, mc, k0, kc, kernel.mr, d);
        },
        [&](const View& a, auto i0, auto mc, auto k0, auto kc, float* d) {
          gemm_detail::pack_a(a, i0, mc, k0, kc, kernel.mr, d);
        });
  }
  if (kernels_with_packing == 0) SKIP("no float32 kernel on this CPU packs in its own instruction set");
}

TEST_CASE("GEMM row blocks give every thread the same number of row panels, to within one", "[ch00][gemm]") {
  // OpenMP's static schedule gives thread t blocks [t * count / threads, (t + 1) * count / threads).
  for (const auto& [mr, mc] : {std::pair<int, std::int64_t>{14, 98}, {6, 144}, {8, 144}})
    for (const int threads : {1, 2, 3, 4})
      for (std::int64_t M = 1; M <= 2100; ++M) {
        const RowBlocks rows(M, mr, mc, threads);
        CAPTURE(mr, mc, threads, M, rows.count);
        REQUIRE(rows.start(0) == 0);
        REQUIRE(rows.start(rows.count) == M);
        std::int64_t fewest = M, most = 0;
        for (std::int64_t b = 0; b < rows.count; ++b) {
          const std::int64_t n = rows.start(b + 1) - rows.start(b);
          REQUIRE(n > 0);
          REQUIRE(rows.start(b) % mr == 0);  // whole panels: edge tiles only at M's end
          REQUIRE(n <= rows.max_rows());
          REQUIRE(rows.max_rows() <= (mc + mr - 1) / mr * mr);  // the packed block stays about mc rows
        }
        if (rows.panels < threads) continue;  // too few panels to give every thread one
        REQUIRE(rows.count % threads == 0);
        for (int t = 0; t < threads; ++t) {
          const std::int64_t first = rows.start(t * rows.count / threads);
          const std::int64_t last = rows.start((t + 1) * rows.count / threads);
          const std::int64_t panels = (last - first + mr - 1) / mr;
          fewest = std::min(fewest, panels), most = std::max(most, panels);
        }
        REQUIRE(most - fewest <= 1);
      }
}
