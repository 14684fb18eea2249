// The CUDA backend's GEMM on a GPU: float32 operands (v3: register-blocked FMA on the CUDA cores) against
// bfloat16 operands with a float32 product (v4: the tensor cores' mma.sync; v5: the same fed by ldmatrix and a
// cp.async pipeline; v6: Hopper's wgmma on v5's stages, "-" where the GPU or the build cannot run it), at square sizes
// and the base model's shapes (1024 tokens, d_model 512, d_ff 2048), in TFLOP/s. On a GPU each timed run launches the
// GEMM enough times to last about 0.1 s between two waits for the device (a one-element copy to the host), so launch
// and copy latency stay out; the best of the runs, the two dtypes in turn. The yardstick, cuBLAS through PyTorch on the
// same shapes, is tools/compare/torch_cuda_gemm.py; tools/gpu/check.sh runs both. A second table times products of one
// row, c[1, N] = a[1, K] W^T with W [N, K] as a layer's forward reads it: chapter 12's language model generating a
// token (d_model 256, SwiGLU's 688, 2,000 ids), each the time of one product in a stream of them, and the weight's
// bytes over it in GB/s: the GEMM that gemm() picks (gemv.cu's warp per element) against v3's tiles.
//
//   build/bench/bin/cuda_gemm_bench [--device cuda|cuda-sim] [--max N]   (N: the largest square; the base
//                                                                        model's shapes from N = 2048)
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>

#include "autograd/autograd.h"
#include "device_wait.h"
#include "ladder_problems.h"
#include "timing.h"

using namespace stepformer;

int main(int argc, char** argv) {
  std::string device = "cuda";
  std::int64_t max = 8192;
  CLI::App app{"cuda_gemm_bench: the CUDA backend's GEMM (float32 v3, bfloat16 v4, v5 and v6) in TFLOP/s"};
  app.add_option("--device", device, "cuda or cuda-sim")->capture_default_str();
  app.add_option("--max", max, "the largest square size (the base model's shapes from 2048)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);  // --max 0 would double the square sizes from 0 forever
  CLI11_PARSE(app, argc, argv);
  const Device dev = parse_device(device);
  const auto gemm_version = ladders::kernels_of(dev).gemm;
  struct Shape3 {
    std::int64_t m, n, k;
    const char* what;
  };
  std::vector<Shape3> shapes;
  for (std::int64_t s = std::min<std::int64_t>(max, 1024); s <= max; s *= 2) shapes.push_back({s, s, s, "square"});
  if (max >= 2048) {
    shapes.push_back({1024, 2048, 512, "FFN up"});
    shapes.push_back({1024, 512, 2048, "FFN down"});
    shapes.push_back({1024, 512, 512, "projection"});
  }
  // v6 needs a compute capability 9.0 GPU and sm_90a code (a DeviceError says so elsewhere).
  const bool v6_runs = [&] {
    const Tensor a = zeros({16, 16}, {DType::bfloat16, dev}), c = zeros({16, 16}, {DType::float32, dev});
    try {
      gemm_version(6, c.desc(), a.desc(), a.desc(), 1.0, 0.0);
      return true;
    } catch (const DeviceError& e) {
      fmt::print("v6 does not run here: {}\n", e.what());
      return false;
    }
  }();
  fmt::print("GEMM c = a b on {}, row-major, c float32; TFLOP/s (best run)\n", device);
  fmt::print("{:>6} {:>6} {:>6} {:>11} {:>14} {:>15} {:>15} {:>15} {:>8} {:>8} {:>8}\n", "M", "N", "K", "",
             "float32 (v3)", "bfloat16 (v4)", "bfloat16 (v5)", "bfloat16 (v6)", "v4 / v3", "v5 / v4", "v6 / v5");
  for (const Shape3& s : shapes) {
    Generator gen(1);
    const Tensor a32 = uniform({s.m, s.k}, -1, 1, gen), b32 = uniform({s.k, s.n}, -1, 1, gen);
    const Tensor a[2] = {a32.to(dev), a32.to(DType::bfloat16).to(dev)};
    const Tensor b[2] = {b32.to(dev), b32.to(DType::bfloat16).to(dev)};
    const Tensor c = empty({s.m, s.n}, {DType::float32, dev});
    const double flops = 2.0 * static_cast<double>(s.m * s.n * s.k);
    const int reps = dev.type == DeviceType::cuda ? static_cast<int>(std::clamp(1e13 / flops, 1.0, 1000.0)) : 1;
    auto run = [&](int version) {
      const int which = version == 3 ? 0 : 1;
      for (int r = 0; r < reps; ++r) gemm_version(version, c.desc(), a[which].desc(), b[which].desc(), 1.0, 0.0);
      bench::wait_for(c);
    };
    const auto best = bench::best_of_rotation(
        3, 1.0, [&] { run(3); }, [&] { run(4); }, [&] { run(5); }, [&] { v6_runs ? run(6) : void(); });
    const auto tflops = [&](double seconds) { return flops * reps / seconds / 1e12; };
    const double v3 = tflops(best[0]), v4 = tflops(best[1]), v5 = tflops(best[2]), v6 = tflops(best[3]);
    fmt::print("{:>6} {:>6} {:>6} {:>11} {:>14.1f} {:>15.1f} {:>15.1f} {:>15} {:>7.2f}x {:>7.2f}x {:>8}\n", s.m, s.n,
               s.k, s.what, v3, v4, v5, v6_runs ? fmt::format("{:.1f}", v6) : "-", v4 / v3, v5 / v4,
               v6_runs ? fmt::format("{:.2f}x", v6 / v5) : "-");
  }
  const Shape3 rows[] = {
      {1, 256, 256, "projection"}, {1, 688, 256, "FFN up"}, {1, 256, 688, "FFN down"}, {1, 2000, 256, "logits"}};
  fmt::print("\nOne row: c[1, N] = a[1, K] W^T on {}, c float32; us per product, GB/s of W (best run)\n", device);
  fmt::print("{:>6} {:>6} {:>6} {:>11} {:>17} {:>17} {:>17} {:>9}\n", "M", "N", "K", "", "float32 gemm()",
             "bfloat16 gemm()", "float32 v3", "v3 / f32");
  for (const Shape3& s : rows) {
    Generator gen(2);
    const Tensor x32 = uniform({s.m, s.k}, -1, 1, gen), w32 = uniform({s.n, s.k}, -1, 1, gen);
    const Tensor x[2] = {x32.to(dev), x32.to(DType::bfloat16).to(dev)};
    const Tensor w[2] = {transpose(w32.to(dev), 0, 1), transpose(w32.to(DType::bfloat16).to(dev), 0, 1)};
    const Tensor c = empty({s.m, s.n}, {DType::float32, dev});
    const int reps = dev.type == DeviceType::cuda ? 2000 : 1;
    Backend& backend = backend_for(dev);
    auto run = [&](int which, bool tiled) {
      for (int r = 0; r < reps; ++r)
        if (tiled)
          gemm_version(3, c.desc(), x[which].desc(), w[which].desc(), 1.0, 0.0);
        else
          backend.gemm(c.desc(), x[which].desc(), w[which].desc(), 1.0, 0.0);
      bench::wait_for(c);
    };
    const auto best = bench::best_of_rotation(
        3, 1.0, [&] { run(0, false); }, [&] { run(1, false); }, [&] { run(0, true); });
    const auto us = [&](double seconds) { return seconds / reps * 1e6; };
    const auto gbps = [&](double seconds, double bytes) { return bytes * s.n * s.k * reps / seconds / 1e9; };
    fmt::print("{:>6} {:>6} {:>6} {:>11} {:>8.2f} {:>8.0f} {:>8.2f} {:>8.0f} {:>8.2f} {:>8.0f} {:>8.2f}x\n", s.m, s.n,
               s.k, s.what, us(best[0]), gbps(best[0], 4), us(best[1]), gbps(best[1], 2), us(best[2]), gbps(best[2], 4),
               best[2] / best[0]);
  }
  return 0;
}
