// The CUDA backend against the CPU backend: every kernel through the ops that use it, forward and
// backward, on odd sizes (not multiples of 32 or of a tile), broadcast and non-contiguous operands.
// The device under test is STEPFORMER_TEST_DEVICE's (cuda-sim, or cuda on a GPU); CTest runs this program
// on cuda-sim in both thread start orders.
//
// Tolerances: float64 1e-12 (only the order of additions differs); float32 2e-5 relative + absolute
// (the CUDA kernels accumulate row sums in float and in another order than the CPU's double sums).
// The dropout mask is compared bit for bit: both devices compute the same Philox bits.
#include <functional>

#include "../helpers.h"
#include "cuda_backend.h"
#include "ladder_problems.h"

using namespace stepformer;
using stepformer::test::close;

namespace {

Device device_under_test() { return default_device() == kCPU ? Device{DeviceType::cuda_sim, 0} : default_device(); }

double tolerance(DType t) { return t == DType::float64 ? 1e-12 : 2e-5; }

// A CPU leaf of `shape` with values in [low, high).
Tensor cpu_input(const Shape& shape, std::uint64_t seed, DType dtype, double low = -1.0, double high = 1.0) {
  Generator gen(seed);
  return uniform(shape, low, high, gen, {dtype, kCPU, false});
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Runs f on CPU leaves and on copies of them on the device under test; backpropagates the same random
// upstream gradient on both; compares the outputs and every leaf's gradient.
void check_parity(const Fn& f, const std::vector<Tensor>& cpu_values, double tol) {
  const Device dev = device_under_test();
  std::vector<Tensor> on_cpu, on_dev;
  for (const Tensor& v : cpu_values) {
    const bool grad = is_floating(v.dtype());
    on_cpu.push_back(grad ? v.detach().set_requires_grad() : v);
    on_dev.push_back(grad ? v.to(dev).set_requires_grad() : v.to(dev));
  }
  const Tensor y_cpu = f(on_cpu), y_dev = f(on_dev);
  REQUIRE(y_dev.device() == dev);
  CHECK(close(y_dev.cpu(), y_cpu, tol, tol));
  if (!y_cpu.requires_grad()) return;
  Generator gen(7);
  const Tensor g = uniform(y_cpu.shape(), -1, 1, gen, {y_cpu.dtype(), kCPU, false});
  y_cpu.backward(g);
  y_dev.backward(g.to(dev));
  for (std::size_t i = 0; i < on_cpu.size(); ++i) {
    INFO("gradient of input " << i);
    REQUIRE(on_dev[i].grad().defined() == on_cpu[i].grad().defined());
    if (!on_cpu[i].grad().defined()) continue;  // not on the path to the output (a mask's input)
    CHECK(on_dev[i].grad().device() == dev);
    CHECK(close(on_dev[i].grad().cpu(), on_cpu[i].grad(), tol, tol));
  }
}

Tensor T(const Tensor& t) { return transpose(t, 0, 1); }

}  // namespace

TEST_CASE("cuda: elementwise kernels match the CPU, broadcast and strided", "[cuda]") {
  for (const DType dt : {DType::float32, DType::float64}) {
    const double tol = tolerance(dt);
    DYNAMIC_SECTION(dtype_name(dt)) {
      const Tensor a = cpu_input({37, 5}, 1, dt), b = cpu_input({5}, 2, dt, 0.5, 2.0);
      const Tensor pos = cpu_input({5, 37}, 3, dt, 0.5, 2.0), wide = cpu_input({37, 10}, 4, dt);
      check_parity([](auto& x) { return x[0] + x[1]; }, {a, b}, tol);
      check_parity([](auto& x) { return x[0] - T(x[1]); }, {a, pos}, tol);
      check_parity([](auto& x) { return x[0] * slice(x[1], 1, 0, 10, 2); }, {a, wide}, tol);
      check_parity([](auto& x) { return x[0] / x[1]; }, {a, b}, tol);
      check_parity([](auto& x) { return -x[0]; }, {a}, tol);
      check_parity([](auto& x) { return pow(x[0], 1.5); }, {pos}, tol);
      check_parity([](auto& x) { return exp(T(x[0])); }, {a}, tol);
      check_parity([](auto& x) { return log(x[0]); }, {pos}, tol);
      check_parity([](auto& x) { return sqrt(x[0]); }, {pos}, tol);
      check_parity([](auto& x) { return rsqrt(x[0]); }, {pos}, tol);
      check_parity([](auto& x) { return tanh(x[0]); }, {a}, tol);
      check_parity([](auto& x) { return relu(x[0]); }, {a}, tol);
      check_parity([](auto& x) { return gelu(x[0] * 3.0); }, {a}, tol);
      check_parity([](auto& x) { return where(gt(x[0], x[1]), x[0], x[1] * 2.0); }, {a, b}, tol);
      check_parity([](auto& x) { return masked_fill(x[0], lt(x[1], x[1] * 0.0 + 1.0), -1e9); }, {a, b}, tol);
      check_parity([](auto& x) { return x[0].to(DType::float64 == x[0].dtype() ? DType::float32 : DType::float64); },
                   {a}, 1e-6);
    }
  }
  SECTION("comparisons, logical_not and int64 arithmetic") {
    const Tensor ids = from_vector(std::vector<std::int64_t>{3, -1, 7, 0, 5}, {5}, {DType::int64, kCPU});
    check_parity([](auto& x) { return logical_not(eq(x[0], x[0] * x[0])); }, {ids}, 0);
    check_parity([](auto& x) { return (x[0] + x[0]) - x[0]; }, {ids}, 0);
  }
}

TEST_CASE("cuda: contiguous() of a transposed matrix (the tiled transpose) matches the CPU", "[cuda]") {
  // transpose.cu takes a copy whose input has its last two dimensions swapped in memory: odd sizes (partial
  // tiles), a batch with a broadcast dimension (stride 0), every dtype; other layouts keep the elementwise copy.
  const Device dev = device_under_test();
  for (const DType dt : {DType::float32, DType::float64, DType::int64, DType::boolean}) {
    DYNAMIC_SECTION(dtype_name(dt)) {
      const Tensor x = cpu_input({2, 37, 70}, 8, DType::float64, -3, 3).to(dt);
      const auto transposed = [](const Tensor& v) {
        return contiguous(transpose(expand(unsqueeze(v, 1), {2, 3, 37, 70}), 2, 3));
      };
      CHECK(transposed(x.to(dev)).cpu().to_vector<double>() == transposed(x).to_vector<double>());
      const Tensor m = cpu_input({33, 1}, 9, DType::float64).to(dt);  // one column: a plain copy
      CHECK(contiguous(transpose(m.to(dev), 0, 1)).cpu().to_vector<double>() ==
            contiguous(transpose(m, 0, 1)).to_vector<double>());
    }
  }
}

TEST_CASE("cuda: reductions match the CPU over any dims, through a block reduction", "[cuda]") {
  for (const DType dt : {DType::float32, DType::float64}) {
    const double tol = tolerance(dt) * 10;  // sums of up to 700 terms
    DYNAMIC_SECTION(dtype_name(dt)) {
      const Tensor x = cpu_input({7, 300, 3}, 5, dt);  // 300 > 256: more terms than threads per block
      check_parity([](auto& v) { return sum(v[0]); }, {x}, tol);
      check_parity([](auto& v) { return sum(v[0], {1}); }, {x}, tol);
      check_parity([](auto& v) { return sum(v[0], {0, 2}, true); }, {x}, tol);
      check_parity([](auto& v) { return mean(transpose(v[0], 0, 2), {-1}); }, {x}, tol);
      check_parity([](auto& v) { return max(v[0], {1}); }, {x}, tol);
      check_parity([](auto& v) { return max(v[0]); }, {x}, tol);
    }
  }
  SECTION("max propagates NaN; int64 sums are exact") {
    const Device dev = device_under_test();
    const Tensor x = from_vector(std::vector<double>{1, NAN, 3, 4, 5, 6}, {2, 3}, {DType::float32, dev});
    const auto m = max(x, {1}).to_vector<double>();
    CHECK(std::isnan(m[0]));
    CHECK(m[1] == 6);
    const Tensor big = full({1000}, 3e12, {DType::int64, dev});
    CHECK(sum(big).to_vector<std::int64_t>()[0] == 3000000000000000);
  }
}

// The GEMM ladder's versions by operand type: v1-v3 multiply float32 and float64, v3 to v6 bfloat16 (float32
// products, as autocast's matmuls), so every version of ladders.h's count runs here.
namespace {
bool gemm_multiplies(int version, DType operands) { return operands == DType::bfloat16 ? version >= 3 : version <= 3; }

// Whether v6 (Hopper's wgmma) runs on `dev`: always on cuda-sim; on a GPU only one of compute capability 9.0 with
// the library built with sm_90a code, and elsewhere it must say so.
bool wgmma_runs(const Device& dev, const ladders::Kernels& ladder) {
  if (dev.type != DeviceType::cuda) return true;
  const Tensor a = zeros({16, 16}, {DType::bfloat16, dev}), c = zeros({16, 16}, {DType::float32, dev});
  try {
    ladder.gemm(6, c.desc(), a.desc(), a.desc(), 1.0, 0.0);
    return true;
  } catch (const DeviceError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::ContainsSubstring("compute capability 9.0") &&
                             Catch::Matchers::ContainsSubstring("sm_90a"));
    return false;
  }
}
}  // namespace

TEST_CASE("cuda: GEMM: every version of the ladder matches the CPU", "[cuda]") {
  const Device dev = device_under_test();
  const ladders::Kernels ladder = ladders::kernels_of(dev);
  const bool v6_runs = wgmma_runs(dev, ladder);
  struct Dims {
    std::int64_t m, n, k;
  };
  for (const DType dt : {DType::float32, DType::float64, DType::bfloat16}) {
    const DType c_dt = dt == DType::bfloat16 ? DType::float32 : dt;
    // 40x48x200: sizes and strides in whole 16-byte pieces, K over several steps of every tile (v5 copies them
    // with cp.async and pipelines 7 steps through its 3 stages); the others stage value by value.
    for (const Dims d : {Dims{1, 1, 1}, Dims{17, 33, 9}, Dims{65, 70, 130}, Dims{40, 48, 200}, Dims{3, 5, 0}}) {
      for (int version = 1; version <= cuda_sim::kGemmVersions; ++version) {
        if (!gemm_multiplies(version, dt) || (version == 6 && !v6_runs)) continue;
        for (const bool hard : {false, true}) {
          DYNAMIC_SECTION(dtype_name(dt) << " v" << version << " " << d.m << "x" << d.n << "x" << d.k
                                         << (hard ? ": a^T, b^T, batch of 3 with a broadcast, beta 0.5" : "")) {
            // hard: both operands transposed views (a contiguous along m, b along k), a batch where a has stride
            // 0, c read back (beta != 0).
            const Tensor a = (hard ? T(cpu_input({d.k, d.m}, 1, c_dt)) : cpu_input({d.m, d.k}, 1, c_dt)).to(dt);
            const Tensor b = (hard ? T(cpu_input({d.n, d.k}, 2, c_dt)) : cpu_input({d.k, d.n}, 2, c_dt)).to(dt);
            const std::int64_t batch = hard ? 3 : 1;
            const Tensor b3 = contiguous(expand(unsqueeze(b, 0), {batch, d.k, d.n})) * 0.5;
            const double alpha = 1.25, beta = hard ? 0.5 : 0.0;
            // With beta == 0 the kernel must not read c (BLAS semantics): fill it with NaN to prove it.
            const Tensor c0 = hard ? cpu_input({batch, d.m, d.n}, 3, c_dt) : full({batch, d.m, d.n}, NAN, {c_dt, kCPU});

            Tensor expected = contiguous(c0 * 1.0);
            backend_for(kCPU).gemm(expected.desc(), expand(unsqueeze(a, 0), {batch, d.m, d.k}).desc(), b3.desc(), alpha,
                                   beta);
            const Tensor a_dev = hard ? T(contiguous(T(a)).to(dev)) : a.to(dev);  // the same strides there
            Tensor c = c0.to(dev);
            const Tensor b3_dev = hard ? transpose(contiguous(transpose(b3, 1, 2)).to(dev), 1, 2) : b3.to(dev);
            ladder.gemm(version, c.desc(), expand(unsqueeze(a_dev, 0), {batch, d.m, d.k}).desc(), b3_dev.desc(), alpha,
                        beta);
            const double tol = dt == DType::float64 ? 1e-12 : 1e-5 * std::max(1.0, std::sqrt(double(d.k)));
            CHECK(close(c.cpu(), expected, tol, tol));
          }
        }
      }
    }
  }
  const auto any = [&](DType dt) { return empty({2, 2}, {dt, dev}).desc(); };
  {
    // With the sections above (each version up to the count runs and matches), the count is exact.
    INFO("ladders.h's kGemmVersions is the number of versions gemm_version runs: one more is no version");
    CHECK_THROWS_AS(
        ladder.gemm(cuda_sim::kGemmVersions + 1, any(DType::float32), any(DType::bfloat16), any(DType::bfloat16), 1, 0),
        ValueError);
    CHECK_THROWS_AS(ladder.gemm(0, any(DType::float32), any(DType::float32), any(DType::float32), 1, 0), ValueError);
  }
  INFO("a version given operands it does not multiply names them");
  CHECK_THROWS_AS(ladder.gemm(4, any(DType::float32), any(DType::float32), any(DType::float32), 1, 0), DTypeError);
  CHECK_THROWS_AS(ladder.gemm(1, any(DType::float32), any(DType::bfloat16), any(DType::bfloat16), 1, 0), DTypeError);
}

TEST_CASE("cuda: every version of the softmax, row-sum and transpose ladders matches the CPU", "[cuda]") {
  const Device dev = device_under_test();
  const ladders::Kernels ladder = ladders::kernels_of(dev);
  for (const DType dt : {DType::float32, DType::float64}) {
    // Rows shorter than a warp, not a multiple of 32, longer than a block (128, 256), and a single row.
    for (const Shape& shape : {Shape{5, 7}, Shape{33, 45}, Shape{3, 300}, Shape{1, 1}}) {
      const double tol = dt == DType::float64 ? 1e-12 : 1e-5 * std::max(1.0, std::sqrt(double(shape[1])));
      const Tensor x = cpu_input(shape, 11, dt, -3.0, 3.0);
      for (int v = 1; v <= cuda_sim::kSoftmaxVersions; ++v)
        DYNAMIC_SECTION("softmax v" << v << " " << dtype_name(dt) << " " << to_string(shape)) {
          Tensor y = full(shape, NAN, {dt, dev});
          ladder.softmax(v, y.desc(), x.to(dev).desc());
          CHECK(close(y.cpu(), softmax(x, -1), tol, tol));
        }
      for (int v = 1; v <= cuda_sim::kRowSumVersions; ++v)
        DYNAMIC_SECTION("row sum v" << v << " " << dtype_name(dt) << " " << to_string(shape)) {
          Tensor y = full({shape[0]}, NAN, {dt, dev});
          ladder.row_sum(v, y.desc(), x.to(dev).desc());
          CHECK(close(y.cpu(), sum(x, {1}), tol, tol));
        }
      for (int v = 1; v <= cuda_sim::kTransposeVersions; ++v)
        DYNAMIC_SECTION("transpose v" << v << " " << dtype_name(dt) << " " << to_string(shape)) {
          const Tensor in = T(x.to(dev));                        // [cols, rows], rows adjacent in memory
          if (in.shape()[0] < 2 || in.shape()[1] < 2) continue;  // transpose_copy takes real matrices only
          Tensor y = full(in.shape(), NAN, {dt, dev});
          ladder.transpose(v, y.desc(), in.desc());
          CHECK(close(y.cpu(), contiguous(T(x)), 0.0, 0.0));
        }
    }
  }
  const Tensor any = empty({2, 2}, {DType::float32, dev});
  CHECK_THROWS_AS(ladder.softmax(4, any.desc(), any.desc()), ValueError);
  CHECK_THROWS_AS(ladder.row_sum(0, any.desc(), any.desc()), ValueError);
  CHECK_THROWS_AS(ladder.transpose(4, any.desc(), any.desc()), ValueError);
}

TEST_CASE("cuda: matmul through the op, batched and broadcast, forward and backward", "[cuda]") {
  for (const DType dt : {DType::float32, DType::float64}) {
    DYNAMIC_SECTION(dtype_name(dt)) {
      const double tol = tolerance(dt) * 10;
      check_parity([](auto& x) { return matmul(x[0], x[1]); },
                   {cpu_input({2, 3, 19, 40}, 1, dt), cpu_input({40, 21}, 2, dt)}, tol);
      check_parity([](auto& x) { return matmul(x[0], transpose(x[1], -1, -2)); },
                   {cpu_input({4, 9, 70}, 3, dt), cpu_input({4, 33, 70}, 4, dt)}, tol);
      check_parity([](auto& x) { return matmul(x[0], x[1]); }, {cpu_input({7}, 5, dt), cpu_input({7, 3}, 6, dt)}, tol);
    }
  }
}

TEST_CASE("cuda: softmax, log_softmax, layer_norm and rms_norm rows of odd lengths", "[cuda]") {
  for (const DType dt : {DType::float32, DType::float64}) {
    for (const std::int64_t C : {1, 7, 32, 33, 100}) {
      DYNAMIC_SECTION(dtype_name(dt) << " rows of " << C) {
        const double tol = tolerance(dt) * 5;
        const Tensor x = cpu_input({5, 3, C}, 10 + C, dt, -4, 4);
        check_parity([](auto& v) { return softmax(v[0]); }, {x}, tol);
        check_parity([](auto& v) { return log_softmax(v[0]); }, {x}, tol);
        check_parity([](auto& v) { return softmax(transpose(v[0], 0, 1), 1); }, {x}, tol);  // made contiguous
        check_parity([](auto& v) { return layer_norm(v[0], v[1], v[2]); },
                     {x, cpu_input({C}, 2, dt, 0.5, 1.5), cpu_input({C}, 3, dt)}, tol * 20);
        check_parity([](auto& v) { return layer_norm(v[0], Tensor(), Tensor()); }, {x}, tol * 20);
        check_parity([](auto& v) { return rms_norm(v[0], v[1]); }, {x, cpu_input({C}, 4, dt, 0.5, 1.5)}, tol * 20);
        check_parity([](auto& v) { return rms_norm(v[0], Tensor()); }, {x}, tol * 20);
      }
    }
  }
}

TEST_CASE("cuda: rotate_pairs on a permuted view of heads, both pairings, and its backward", "[cuda]") {
  for (const DType dt : {DType::float32, DType::float64})
    for (const std::int64_t pairs : {1, 16, 33}) {
      DYNAMIC_SECTION(dtype_name(dt) << ", " << pairs << " pairs") {
        const std::vector<Tensor> v{cpu_input({2, 5, 3, 2 * pairs}, 20 + pairs, dt, -2, 2),
                                    cpu_input({5, pairs}, 21, dt), cpu_input({5, pairs}, 22, dt)};
        for (const RopePairing pairing : {RopePairing::half, RopePairing::adjacent})  // x read as [2, 3, 5, D]
          check_parity(
              [pairing](auto& x) { return rotate_pairs(transpose(x[0], 1, 2), x[1].detach(), x[2].detach(), pairing); },
              v, tolerance(dt) * 5);
      }
    }
}

TEST_CASE("cuda: embedding gather and scatter-add with repeated ids and a padding id", "[cuda]") {
  const Tensor ids = from_vector(std::vector<std::int64_t>{3, 0, 3, 6, 3, 1, 0}, {7}, {DType::int64, kCPU});
  for (const DType dt : {DType::float32, DType::float64}) {
    DYNAMIC_SECTION(dtype_name(dt)) {
      const Tensor w = cpu_input({7, 37}, 1, dt);
      check_parity([](auto& x) { return embedding(x[0], x[1]); }, {w, ids}, tolerance(dt));
      check_parity([](auto& x) { return embedding(x[0], x[1], 3); }, {w, ids}, tolerance(dt));
    }
  }
  const Device dev = device_under_test();
  const Tensor bad = from_vector(std::vector<std::int64_t>{1, 2, 9, -1}, {4}, {DType::int64, dev});
  // A GPU reports a bad id at its next copy to the host, not at the op (Backend::gather_rows): no wait per check.
  const Tensor rows = embedding(ones({7, 4}, {DType::float32, dev}), bad);
  REQUIRE_THROWS_WITH_ALL(rows.cpu(), IndexError, "embedding", "id 9 at position [2]", "next copy");
  std::vector<double> want(16, 0.0);  // reported once; ids 9 and -1 read as rows of zeros
  std::fill(want.begin(), want.begin() + 8, 1.0);
  CHECK(rows.cpu().to_vector<double>() == want);
}

// The checks' results wait on the device in a ring of 256 slots (checks.cu), read at the next copy from the device or
// when the ring is used up: a bad id among more lookups than that is still reported, once.
TEST_CASE("cuda: a bad id is reported once, also after more lookups than the checks' ring holds", "[cuda]") {
  const Device dev = device_under_test();
  const Tensor table = ones({7, 4}, {DType::float32, dev});
  const Tensor good = from_vector(std::vector<std::int64_t>{1, 2}, {2}, {DType::int64, dev});
  const Tensor bad = from_vector(std::vector<std::int64_t>{1, 8}, {2}, {DType::int64, dev});
  const auto lookups = [&] {
    (void)embedding(table, bad);
    Tensor last;
    for (int i = 0; i < 600; ++i) last = embedding(table, good);
    return last.cpu();
  };
  REQUIRE_THROWS_WITH_ALL(lookups(), IndexError, "embedding", "id 8 at position [1]");
  CHECK_NOTHROW(embedding(table, good).cpu());
}

TEST_CASE("cuda: fused cross-entropy with label smoothing and ignored targets", "[cuda]") {
  const Tensor targets = from_vector(std::vector<std::int64_t>{4, -100, 0, 40, 4, 2}, {6}, {DType::int64, kCPU});
  for (const DType dt : {DType::float32, DType::float64}) {
    for (const double smoothing : {0.0, 0.1}) {
      DYNAMIC_SECTION(dtype_name(dt) << " smoothing " << smoothing) {
        const Tensor logits = cpu_input({6, 41}, 3, dt, -5, 5);
        check_parity([smoothing](auto& x) { return cross_entropy(x[0], x[1], -100, smoothing); }, {logits, targets},
                     tolerance(dt) * 5);
        check_parity([smoothing](auto& x) { return cross_entropy(x[0], x[1], -100, smoothing, Reduction::none); },
                     {logits, targets}, tolerance(dt) * 5);
      }
    }
  }
  const Device dev = device_under_test();
  const Tensor bad = from_vector(std::vector<std::int64_t>{1, 5, 2}, {3}, {DType::int64, dev});
  const Tensor loss = cross_entropy(ones({3, 5}, {DType::float32, dev}), bad);
  REQUIRE_THROWS_WITH_ALL(loss.item(), IndexError, "cross_entropy", "target 5", "next copy");
}

TEST_CASE("cuda: random fills use the CPU's Philox bits; dropout masks are bit-identical", "[cuda]") {
  const Device dev = device_under_test();
  for (const DType dt : {DType::float32, DType::float64}) {
    DYNAMIC_SECTION(dtype_name(dt)) {
      Generator g1(42), g2(42);
      const Tensor x = ones({1001}, {dt, kCPU});
      const Tensor m_cpu = dropout(x, 0.3, true, g1), m_dev = dropout(x.to(dev), 0.3, true, g2);
      CHECK(m_cpu.to_vector<double>() == m_dev.to_vector<double>());
      CHECK(g1.offset() == g2.offset());
      Generator g3(5), g4(5);
      CHECK(close(uniform({999}, -2, 3, g3, {dt, kCPU}), uniform({999}, -2, 3, g4, {dt, dev}).cpu(), 1e-6, 1e-6));
      CHECK(close(normal({999}, 1, 2, g3, {dt, kCPU}), normal({999}, 1, 2, g4, {dt, dev}).cpu(), 1e-5, 1e-5));
    }
  }
}

TEST_CASE("cuda: fused Adam and AdamW steps match the CPU", "[cuda]") {
  const Device dev = device_under_test();
  for (const bool decoupled : {false, true}) {
    DYNAMIC_SECTION((decoupled ? "AdamW" : "Adam")) {
      Tensor p = cpu_input({333}, 1, DType::float32), g = cpu_input({333}, 2, DType::float32);
      Tensor m = zeros({333}, {DType::float32, kCPU}), v = zeros({333}, {DType::float32, kCPU});
      Tensor pd = p.to(dev), gd = g.to(dev), md = m.to(dev), vd = v.to(dev);
      for (std::int64_t step = 1; step <= 3; ++step) {
        const AdamConfig cfg{1e-2, 0.9, 0.98, 1e-9, 0.01, decoupled, step, {}};
        adam_update_(p, g, m, v, cfg);
        adam_update_(pd, gd, md, vd, cfg);
      }
      CHECK(close(pd.cpu(), p, 1e-6, 1e-6));
      CHECK(close(md.cpu(), m, 1e-6, 1e-6));
      CHECK(close(vd.cpu(), v, 1e-6, 1e-6));
    }
  }
}

TEST_CASE("cuda: devices do not mix; to() copies and carries gradients back", "[cuda]") {
  const Device dev = device_under_test();
  const Tensor on_cpu = ones({2, 3}, {DType::float32, kCPU}), on_dev = ones({2, 3}, {DType::float32, dev});
  const std::string name = device_name(dev);
  REQUIRE_THROWS_WITH_ALL(on_cpu + on_dev, DeviceError, "add", "different devices", "cpu", name.c_str());
  REQUIRE_THROWS_WITH_ALL(matmul(on_dev, transpose(on_cpu, 0, 1)), DeviceError, "matmul", "cpu");

  const Tensor x = from_vector(std::vector<double>{1, 2, 3}, {3}, {DType::float64, kCPU, true});
  const Tensor y = x.to(dev);
  CHECK(y.device() == dev);
  CHECK(y.to_vector<double>() == std::vector<double>{1, 2, 3});
  sum(y * y).backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().device() == kCPU);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2, 4, 6});
  CHECK(parse_device("cuda-sim") == Device{DeviceType::cuda_sim, 0});
  REQUIRE_THROWS_WITH_ALL(parse_device("gpu"), DeviceError, "unknown device", "gpu");
}

TEST_CASE("cuda: device memory is returned when tensors die", "[cuda]") {
  const Device dev = device_under_test();
  const std::size_t before = bytes_in_use(dev);
  {
    const Tensor a = ones({64, 64}, {DType::float32, dev, true});
    sum(matmul(a, a)).backward();
    CHECK(bytes_in_use(dev) > before);
  }
  CHECK(bytes_in_use(dev) == before);
}

TEST_CASE("ex9.1: the row softmax kernel, one warp per row, on rows shorter and longer than a warp", "[ex9.1]") {
  // Graded on cuda-sim (or a GPU): the kernel's values against the CPU's, including a row where every
  // element is the same (the max must be subtracted: exp(1000) overflows) and a row longer than 32.
  const Device dev = device_under_test();
  for (const std::int64_t C : {1, 5, 32, 45, 100}) {
    const Tensor x = cpu_input({6, C}, 50 + C, DType::float32, -30, 30);
    INFO("rows of " << C << ": each lane holds part of the row; warp_reduce combines the 32 lanes' max and sum");
    CHECK(close(softmax(x.to(dev)).cpu(), softmax(x), 1e-6, 1e-5));
    CHECK(close(log_softmax(x.to(dev)).cpu(), log_softmax(x), 1e-5, 1e-5));
  }
  const Tensor big = full({3, 40}, 1000.0, {DType::float32, kCPU});
  INFO("softmax of large equal logits is uniform; without subtracting the row max, exp overflows to inf");
  CHECK(close(softmax(big.to(dev)).cpu(), full({3, 40}, 1.0 / 40, {DType::float32, kCPU}), 1e-7, 1e-6));
}
