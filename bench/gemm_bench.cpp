// GEMM benchmark: stepformer's CPU GEMM against oneDNN's dnnl_sgemm (float32) and OpenBLAS's cblas_sgemm /
// cblas_dgemm, measured in the same run, on the same data, 1 and 2 threads, the three in turn. Prints GFLOP/s
// and the ratios "x oneDNN", "x OpenBLAS" (their time / ours; > 1 means ours is faster). oneDNN is the fair yardstick
// on CPUs newer than Debian's OpenBLAS 0.3.21, which falls back to its Haswell kernels there (docs/performance.md).
//
// --bf16: bfloat16 operands with a float32 product: ours against oneDNN's matmul primitive with bfloat16
// source and weights (its bfloat16 path), and against our own float32 GEMM on the same values ("x fp32"). Ours
// is the fastest dot-product kernel this CPU has (AMX's tiles where it has them, else vdpbf16ps with AVX512_BF16);
// where it has both, the vdpbf16ps kernel is timed too ("x vdpbf16ps" = its time / ours).
// STEPFORMER_NO_BF16_DOT=1 times the widening fallback, STEPFORMER_NO_AMX=1 the vdpbf16ps kernel alone.
//
// --cold: float32 and --bf16; 64 MB are written ahead of each timed run, so that A and B come from memory, as a
// training step's operands do (a weight gradient's activations were written during the forward pass), not from cache.
//
//   build/release/bin/gemm_bench [--json FILE] [--double] [--bf16] [--quick] [--cold]
#include <cblas.h>
#include <dnnl.h>

#include <fmt/format.h>
#include <omp.h>
#include <CLI/CLI.hpp>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu/gemm.h"
#include "timing.h"

using namespace stepformer;

namespace {

// Operands 64-byte aligned, as the engine's tensors are (autograd/backends/cpu/memory.cpp): std::vector's 16 bytes
// would time what no training step runs (AMX reads an aligned A in place, and misaligned tile rows load at a third
// of the speed).
template <class T>
struct Aligned {
  using value_type = T;
  Aligned() = default;
  template <class U>
  Aligned(const Aligned<U>&) {}
  T* allocate(std::size_t n) {
    void* p = std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }
  template <class U>
  bool operator==(const Aligned<U>&) const {
    return true;
  }
};
template <class T>
using Buffer = std::vector<T, Aligned<T>>;

struct Case {
  std::int64_t m, k, n;
  const char* what;
  bool b_transposed = false;  // B held as [N, K] (a Linear's weight: x W^T), else [K, N]
  bool a_transposed = false;  // A held as [K, M] (a weight's gradient: dY^T X), else [M, K]
};

// A and B as the case holds them: row-major [M, K] and [K, N], or transposed ([K, M], [N, K]).
template <class T>
void openblas(const Case& s, const T* a, const T* b, T* c) {
  const auto ta = s.a_transposed ? CblasTrans : CblasNoTrans, tb = s.b_transposed ? CblasTrans : CblasNoTrans;
  const std::int64_t lda = s.a_transposed ? s.m : s.k, ldb = s.b_transposed ? s.k : s.n;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, s.m, s.n, s.k, 1.f, a, lda, b, ldb, 0.f, c, s.n);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, s.m, s.n, s.k, 1.0, a, lda, b, ldb, 0.0, c, s.n);
}

// oneDNN has no float64 GEMM: its column is empty for --double.
template <class T>
void onednn(const Case& s, const T* a, const T* b, T* c, int threads) {
  if constexpr (std::is_same_v<T, float>) {
    omp_set_num_threads(threads);  // oneDNN's CPU runtime is OpenMP
    const std::int64_t lda = s.a_transposed ? s.m : s.k, ldb = s.b_transposed ? s.k : s.n;
    if (dnnl_sgemm(s.a_transposed ? 'T' : 'N', s.b_transposed ? 'T' : 'N', s.m, s.n, s.k, 1.f, a, lda, b, ldb, 0.f, c,
                   s.n) != dnnl_success)
      throw std::runtime_error("dnnl_sgemm failed");
  }
}

// The models' products: the base model's feed-forward layer (1024 tokens, d_model 512, d_ff 2048) and a head's
// scores, and chapter 12's language model (16 x 128 tokens, d_model 256 = K, SwiGLU 688, 2000 ids).
const std::vector<Case> kModelShapes = {{1024, 512, 2048, "FFN up"},        {1024, 2048, 512, "FFN down"},
                                        {512, 64, 512, "attention scores"}, {2048, 256, 688, "LM SwiGLU in"},
                                        {2048, 688, 256, "LM SwiGLU out"},  {2048, 256, 2000, "LM head"}};

// The language model's products as its training step holds them. "x W^T": B held as a Linear holds its weight,
// [N, K] (the tied head too). "dY^T X": A held as [K, M], a Linear's weight gradient over the batch's 16 x 128 tokens.
const std::vector<Case> kLmStepShapes = {
    {2048, 256, 688, "LM SwiGLU in x W^T", true},   {2048, 688, 256, "LM SwiGLU out x W^T", true},
    {2048, 256, 2000, "LM head x E^T", true},       {256, 2048, 256, "LM dW q dY^T X", false, true},
    {64, 2048, 256, "LM dW k dY^T X", false, true}, {688, 2048, 256, "LM dW in dY^T X", false, true},
    {2000, 2048, 256, "LM dE dY^T X", false, true}, {256, 2048, 688, "LM dW out dY^T X", false, true}};

// More bytes than this CPU's caches hold (L3: 32 MB on Zen 3, 4 and 5), written once per --cold run.
void evict_caches() {
  static std::vector<char> bytes(64 << 20);
  for (std::size_t i = 0; i < bytes.size(); i += 64) ++bytes[i];
}

template <class T>
int run(const std::string& json_path, bool quick, bool cold) {
  std::vector<Case> cases = {{256, 256, 256, "square"},
                             {512, 512, 512, "square"},
                             {1024, 1024, 1024, "square"},
                             {2048, 2048, 2048, "square"},
                             {64, 64, 64, "small"}};
  cases.insert(cases.end(), kModelShapes.begin(), kModelShapes.end());
  if constexpr (std::is_same_v<T, float>) cases.insert(cases.end(), kLmStepShapes.begin(), kLmStepShapes.end());
  if (quick) cases.resize(3);
  const char* type = std::is_same_v<T, float> ? "float32" : "float64";
  constexpr bool with_onednn = std::is_same_v<T, float>;
  const dnnl_version_t* dnnl = dnnl_version();
  fmt::print(
      "GEMM {} (C[M,N] = A[M,K] @ B[K,N], row-major unless the shape says), kernel '{}', oneDNN {}.{}.{}, {} "
      "OpenBLAS{}\n",
      type, cpu::gemm_kernels<T>().back().name, dnnl->major, dnnl->minor, dnnl->patch, openblas_get_config(),
      cold ? ", operands from memory (--cold)" : "");
  fmt::print("{:>18} {:>16} {:>7} {:>10} {:>10} {:>10} {:>9} {:>9}\n", "shape MxKxN", "", "threads", "ours GF/s",
             "oneDNN", "OpenBLAS", "x oneDNN", "x OpenBLAS");
  std::string json = "[";
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(-1, 1);
  for (const auto& c : cases) {
    Buffer<T> a(c.m * c.k), b(c.k * c.n), ours(c.m * c.n), blas(c.m * c.n), dnn(c.m * c.n);
    for (auto& x : a) x = static_cast<T>(u(rng));
    for (auto& x : b) x = static_cast<T>(u(rng));
    const std::int64_t rs_a = c.a_transposed ? 1 : c.k, cs_a = c.a_transposed ? c.m : 1;
    const std::int64_t rs_b = c.b_transposed ? 1 : c.n, cs_b = c.b_transposed ? c.k : 1;
    const double flops = 2.0 * static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k);
    for (const int threads : {1, 2}) {
      openblas_set_num_threads(threads);
      const auto [t_ours, t_blas, t_dnn] = bench::best_of_rotation_after(
          [cold] {
            if (cold) evict_caches();
          },
          3, quick ? 0.6 : 3.0,
          [&] {
            cpu::gemm<T>(c.m, c.n, c.k, T(1), {a.data(), rs_a, cs_a}, {b.data(), rs_b, cs_b}, T(0),
                         {ours.data(), c.n, 1}, threads);
          },
          [&] { openblas<T>(c, a.data(), b.data(), blas.data()); },
          [&] { onednn<T>(c, a.data(), b.data(), dnn.data(), threads); });
      double worst = 0;
      for (std::size_t i = 0; i < ours.size(); ++i) {
        worst = std::max(worst, std::abs(double(ours[i] - blas[i])));
        if (with_onednn) worst = std::max(worst, std::abs(double(ours[i] - dnn[i])));
      }
      const std::string shape = fmt::format("{}x{}x{}", c.m, c.k, c.n);
      const double gf_ours = flops / t_ours / 1e9, gf_blas = flops / t_blas / 1e9, gf_dnn = flops / t_dnn / 1e9;
      fmt::print("{:>18} {:>16} {:>7} {:>10.1f} {:>10} {:>10.1f} {:>9} {:>8.2f}x{}\n", shape, c.what, threads, gf_ours,
                 with_onednn ? fmt::format("{:.1f}", gf_dnn) : "-", gf_blas,
                 with_onednn ? fmt::format("{:.2f}x", t_dnn / t_ours) : "-", t_blas / t_ours,
                 worst > (std::is_same_v<T, float> ? 1e-2 : 1e-9) ? "  RESULTS DIFFER" : "");
      json += fmt::format(
          "{}{{\"dtype\":\"{}\",\"m\":{},\"k\":{},\"n\":{},\"threads\":{},\"ours_gflops\":{:.2f},"
          "\"openblas_gflops\":{:.2f},\"ratio\":{:.3f}{}}}",
          json.size() > 1 ? "," : "", type, c.m, c.k, c.n, threads, gf_ours, gf_blas, t_blas / t_ours,
          with_onednn ? fmt::format(",\"onednn_gflops\":{:.2f},\"onednn_ratio\":{:.3f}", gf_dnn, t_dnn / t_ours) : "");
    }
  }
  json += "]\n";
  if (!json_path.empty()) std::ofstream(json_path) << json;
  return 0;
}

// OpenBLAS's header declares a global `bfloat16` (uint16_t) too: ours by another name here.
using Bf16 = stepformer::bfloat16;

// oneDNN's matmul primitive, bfloat16 A and B, float32 C; prim is null where oneDNN has no bfloat16 matmul.
struct OnednnBf16 {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::unique_ptr<dnnl::matmul> prim;
  dnnl::memory a, b, c;
  OnednnBf16(std::int64_t m, std::int64_t n, std::int64_t k, Bf16* pa, Bf16* pb, float* pc, bool a_transposed,
             bool b_transposed) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::desc a_md({m, k}, dt::bf16, a_transposed ? tag::ba : tag::ab),
        b_md({k, n}, dt::bf16, b_transposed ? tag::ba : tag::ab), c_md({m, n}, dt::f32, tag::ab);
    try {
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), engine);
      prim = std::make_unique<dnnl::matmul>(pd);
    } catch (const dnnl::error&) {
      return;  // unimplemented on this CPU
    }
    a = dnnl::memory(a_md, engine, pa), b = dnnl::memory(b_md, engine, pb), c = dnnl::memory(c_md, engine, pc);
  }
  void run(int threads) {
    omp_set_num_threads(threads);
    prim->execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    stream.wait();
  }
};

int run_bf16(const std::string& json_path, bool quick, bool cold) {
  // "x W^T" and "dY^T X": as kLmStepShapes says.
  std::vector<Case> cases = {
      {1024, 1024, 1024, "square"}, {2048, 2048, 2048, "square"}, {512, 512, 64, "attention x V"}};
  cases.insert(cases.end(), kModelShapes.begin(), kModelShapes.end());
  cases.push_back({1024, 512, 2048, "FFN up x W^T", true});
  cases.insert(cases.end(), kLmStepShapes.begin(), kLmStepShapes.end());
  for (const Case& c :
       {// The base model's output layer (1024 tokens, d_model 512, 37,000 ids): its logits, their gradient
        // through the tied embedding, and the embedding's gradient; the step's largest products.
        Case{1024, 512, 37000, "base head x E^T", true}, Case{1024, 37000, 512, "base dX dY E"},
        Case{37000, 1024, 512, "base dE dY^T X", false, true}})
    cases.push_back(c);
  if (quick) cases.resize(2);
  const dnnl_version_t* dnnl = dnnl_version();
  const char* dot = cpu::bf16_dot_kernel();
  const std::vector<std::string> dots = cpu::bf16_dot_kernels();
  const bool vdpbf16ps_too = dots.size() > 1;  // AMX's kernel is ours; vdpbf16ps's is dots[0]
  fmt::print(
      "GEMM bfloat16 A, B -> float32 C (row-major), ours: {}; oneDNN {}.{}.{} matmul primitive (bf16 src, "
      "weights){}\n",
      dot ? fmt::format("the '{}' kernel ({} on pairs of k)", dot,
                        std::string(dot) == "amx_bf16" ? "TDPBF16PS on AMX tiles" : "vdpbf16ps")
          : fmt::format("float32 kernel '{}' on operands widened a block at a time (no AVX512_BF16, or "
                        "STEPFORMER_NO_BF16_DOT set)",
                        cpu::gemm_kernels<float>().back().name),
      dnnl->major, dnnl->minor, dnnl->patch, cold ? ", operands from memory (--cold)" : "");
  fmt::print("{:>18} {:>20} {:>7} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>12}\n", "shape MxKxN", "", "threads",
             "ours GF/s", "oneDNN", "ours fp32", "vdpbf16ps", "x oneDNN", "x fp32", "x vdpbf16ps");
  std::string json = "[";
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const auto& c : cases) {
    Buffer<Bf16> a(c.m * c.k), b(c.k * c.n);
    Buffer<float> af(a.size()), bf(b.size()), ours(c.m * c.n), dnn(c.m * c.n), fp32(c.m * c.n), other(c.m * c.n);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = Bf16(u(rng)), af[i] = static_cast<float>(a[i]);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = Bf16(u(rng)), bf[i] = static_cast<float>(b[i]);
    OnednnBf16 onednn(c.m, c.n, c.k, a.data(), b.data(), dnn.data(), c.a_transposed, c.b_transposed);
    const std::int64_t rs_a = c.a_transposed ? 1 : c.k, cs_a = c.a_transposed ? c.m : 1;
    const std::int64_t rs_b = c.b_transposed ? 1 : c.n, cs_b = c.b_transposed ? c.k : 1;
    const double flops = 2.0 * static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k);
    for (const int threads : {1, 2}) {
      const auto [t_ours, t_fp32, t_dnn, t_other] = bench::best_of_rotation_after(
          [cold] {
            if (cold) evict_caches();
          },
          3, quick ? 0.6 : 3.0,
          [&] {
            cpu::gemm<float, Bf16>(c.m, c.n, c.k, 1.f, {a.data(), rs_a, cs_a}, {b.data(), rs_b, cs_b}, 0.f,
                                   {ours.data(), c.n, 1}, threads);
          },
          [&] {
            cpu::gemm<float>(c.m, c.n, c.k, 1.f, {af.data(), rs_a, cs_a}, {bf.data(), rs_b, cs_b}, 0.f,
                             {fp32.data(), c.n, 1}, threads);
          },
          [&] {
            if (onednn.prim) onednn.run(threads);
          },
          [&] {
            if (vdpbf16ps_too)
              cpu::gemm<float, Bf16>(c.m, c.n, c.k, 1.f, {a.data(), rs_a, cs_a}, {b.data(), rs_b, cs_b}, 0.f,
                                     {other.data(), c.n, 1}, threads, nullptr, dots[0].c_str());
          });
      double worst = 0;
      for (std::size_t i = 0; i < ours.size(); ++i) {
        worst = std::max(worst, std::abs(double(ours[i] - fp32[i])));
        if (onednn.prim) worst = std::max(worst, std::abs(double(ours[i] - dnn[i])));
        if (vdpbf16ps_too) worst = std::max(worst, std::abs(double(ours[i] - other[i])));
      }
      const std::string shape = fmt::format("{}x{}x{}", c.m, c.k, c.n);
      const double gf_ours = flops / t_ours / 1e9, gf_fp32 = flops / t_fp32 / 1e9, gf_dnn = flops / t_dnn / 1e9;
      fmt::print("{:>18} {:>20} {:>7} {:>10.1f} {:>10} {:>10.1f} {:>10} {:>9} {:>8.2f}x {:>12}{}\n", shape, c.what,
                 threads, gf_ours, onednn.prim ? fmt::format("{:.1f}", gf_dnn) : "-", gf_fp32,
                 vdpbf16ps_too ? fmt::format("{:.1f}", flops / t_other / 1e9) : "-",
                 onednn.prim ? fmt::format("{:.2f}x", t_dnn / t_ours) : "-", t_fp32 / t_ours,
                 vdpbf16ps_too ? fmt::format("{:.2f}x", t_other / t_ours) : "-",
                 worst > 1e-2 ? "  RESULTS DIFFER" : "");
      json += fmt::format(
          "{}{{\"dtype\":\"bfloat16\",\"m\":{},\"k\":{},\"n\":{},\"threads\":{},\"ours_gflops\":{:.2f},"
          "\"fp32_gflops\":{:.2f}{}{}}}",
          json.size() > 1 ? "," : "", c.m, c.k, c.n, threads, gf_ours, gf_fp32,
          vdpbf16ps_too ? fmt::format(",\"vdpbf16ps_gflops\":{:.2f}", flops / t_other / 1e9) : "",
          onednn.prim ? fmt::format(",\"onednn_gflops\":{:.2f},\"onednn_ratio\":{:.3f}", gf_dnn, t_dnn / t_ours) : "");
    }
  }
  json += "]\n";
  if (!json_path.empty()) std::ofstream(json_path) << json;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json;
  bool dbl = false, bf16 = false, quick = false, cold = false;
  CLI::App app{"gemm_bench: the CPU GEMM against oneDNN and OpenBLAS, 1 and 2 threads, in GFLOP/s"};
  app.add_option("--json", json, "also write the results to this JSON file");
  app.add_flag("--double", dbl, "float64 products (against OpenBLAS alone)");
  app.add_flag("--bf16", bf16, "bfloat16 operands with a float32 product (against oneDNN's bfloat16 matmul)");
  app.add_flag("--quick", quick, "the first three shapes, shorter runs");
  app.add_flag("--cold", cold, "A and B from memory: 64 MB written ahead of each timed run");
  CLI11_PARSE(app, argc, argv);
  if (cold && dbl) {
    fmt::print(stderr, "gemm_bench: --cold times float32 and bfloat16 products only (not with --double)\n");
    return 2;
  }
  if (bf16) return run_bf16(json, quick, cold);
  return dbl ? run<double>(json, quick, false) : run<float>(json, quick, cold);
}
