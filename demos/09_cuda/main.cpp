// Chapter 09 — CUDA kernels on cuda-sim. Read docs/09_cuda.md beside this file.
// One small kernel, written as the elementwise kernels of autograd/backends/cuda/elementwise.cu are (one
// thread per element, a grid-stride loop), runs on cuda-sim: every CUDA thread records which elements it
// computed, and the demo prints the map. Then the same operation runs through stepformer's own CUDA
// backend on cuda-sim and on the CPU device, and the results are compared; last, it is recorded as a graph on
// cuda-sim and replayed with one launch.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/device_graph.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "cudasim/cudasim.h"
#include "demo.h"

namespace sf = stepformer;

namespace {

// out[i] = a[i] + alpha * b[i], and who[i] = the thread that wrote it (block * 1000 + thread).
// Grid-stride: thread t of block k starts at element k * blockDim + t and jumps by the whole grid's
// thread count, so any n fits any grid.
__global__ void axpy_kernel(float* out, int* who, const float* a, const float* b, float alpha, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = a[i] + alpha * b[i];
    who[i] = static_cast<int>(blockIdx.x * 1000 + threadIdx.x);
  }
}

// The map the threads recorded, as a picture: one cell per element, coloured by the block that computed it and
// labelled with the thread; one row per pass of the grid-stride loop (the grid's blocks * threads elements).
std::string grid_stride_svg(const std::vector<int>& who, int blocks, int threads) {
  const int n = static_cast<int>(who.size()), per_pass = blocks * threads, passes = (n + per_pass - 1) / per_pass;
  const int cell = 30, left = 70, top = 44;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"Helvetica, sans-serif\" font-size=\"11\">\n"
      "<text x=\"10\" y=\"18\" font-size=\"14\">axpy_kernel&lt;&lt;&lt;{2}, {3}&gt;&gt;&gt; on {4} elements: cell = "
      "element i, colour = block, number = thread</text>\n",
      left + per_pass * cell + 10, top + passes * (cell + 10) + 30, blocks, threads, n);
  for (int i = 0; i < n; ++i) {
    const int pass = i / per_pass, col = i % per_pass, block = who[static_cast<std::size_t>(i)] / 1000;
    const int x = left + col * cell, y = top + pass * (cell + 10);
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#333\"/>"
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
        x, y, cell, cell, sf::demo::region_fill(static_cast<std::size_t>(block)), x + cell / 2, y + cell / 2 + 4,
        who[static_cast<std::size_t>(i)] % 1000);
    if (col == 0) svg += fmt::format("<text x=\"10\" y=\"{}\">i = {}..</text>\n", y + cell / 2 + 4, i);
  }
  return svg + fmt::format(
                   "<text x=\"10\" y=\"{}\">each pass of the loop moves every thread on by gridDim.x * "
                   "blockDim.x = {} elements</text>\n</svg>\n",
                   top + passes * (cell + 10) + 16, per_pass);
}

// The larger of a largest difference so far and |diff|, NaN once any difference is NaN (std::max would keep the
// old value: every comparison with NaN is false, and memory no kernel wrote reads as NaN on cuda-sim).
double worse(double so_far, double diff) { return std::isnan(diff) ? diff : std::max(so_far, std::abs(diff)); }

}  // namespace

int main(int argc, char** argv) try {
  sf::demo::CommonOptions common;
  int n = 37, threads = 8, blocks = 3;
  CLI::App app{
      "09_cuda: a CUDA kernel run on cuda-sim, which thread computed which element, and the same op on the CPU"};
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.add_option("--n", n, "elements")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--threads", threads, "threads per block")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--blocks", blocks, "blocks in the grid")->capture_default_str()->check(CLI::Range(1, 1024));
  sf::demo::add_common_options(app, common, false);  // --threads: per block here
  CLI11_PARSE(app, argc, argv);

  sf::Generator gen(common.seed);
  const std::vector<float> a = sf::uniform({n}, -1, 1, gen, {sf::DType::float32}).to_vector<float>();
  const std::vector<float> b = sf::uniform({n}, -1, 1, gen, {sf::DType::float32}).to_vector<float>();
  std::vector<float> out(static_cast<std::size_t>(n));
  std::vector<int> who(static_cast<std::size_t>(n), -1);
  cudasim::launch(axpy_kernel, cudasim::dim3(static_cast<unsigned>(blocks)),
                  cudasim::dim3(static_cast<unsigned>(threads)), 0, out.data(), who.data(), a.data(), b.data(), 2.0f,
                  n);

  fmt::print("axpy_kernel<<<{}, {}>>> on {} elements: {} threads in all, each takes elements i, i + {}, ...\n\n",
             blocks, threads, n, blocks * threads, blocks * threads);
  fmt::print("element  block  thread      a[i]      b[i]   a + 2 b\n");
  for (int i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    fmt::print("{:7}  {:5}  {:6}  {:8.4f}  {:8.4f}  {:8.4f}\n", i, who[k] / 1000, who[k] % 1000, a[k], b[k], out[k]);
  }

  sf::demo::write_output(common.out, "09_grid_stride.svg", grid_stride_svg(who, blocks, threads));

  // The same op through stepformer's ops: on cuda-sim it runs the backend's own CUDA kernels
  // (elementwise.cu's map2_kernel: scale, then add), on the CPU the CPU backend's loops.
  const sf::Device sim{sf::DeviceType::cuda_sim, 0};
  const sf::Tensor ta = sf::from_vector(a, {n}, {sf::DType::float32}),
                   tb = sf::from_vector(b, {n}, {sf::DType::float32});
  const sf::Tensor on_cpu = ta + tb * 2.0;
  const sf::Tensor on_sim = (ta.to(sim) + tb.to(sim) * 2.0).to(sf::kCPU);
  double kernel_vs_cpu = 0, sim_vs_cpu = 0;
  const auto cpu = on_cpu.to_vector<double>(), simv = on_sim.to_vector<double>();
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    kernel_vs_cpu = worse(kernel_vs_cpu, out[i] - cpu[i]);
    sim_vs_cpu = worse(sim_vs_cpu, simv[i] - cpu[i]);
  }
  fmt::print("\nmax |this kernel - cpu| = {}\nmax |cuda-sim - cpu| = {} (stepformer's own kernels, {} elements)\n",
             kernel_vs_cpu, sim_vs_cpu, n);

  // The same op recorded once as a graph (docs/09_cuda.md, "Graphs: many kernels, one launch"): recording queues
  // nothing, and one replay queues all its kernels again, on the memory the recording used.
  const sf::NoGradGuard no_grad;
  const sf::Tensor sa = ta.to(sim), sb = tb.to(sim);
  std::size_t launches = sf::kernel_launches(sim);
  (void)(sa + sb * 2.0);
  const std::size_t eager = sf::kernel_launches(sim) - launches;
  sf::Tensor recorded;
  sf::DeviceGraph graph(sim, [&] { recorded = sa + sb * 2.0; });
  launches = sf::kernel_launches(sim);
  graph.replay();
  const std::size_t replayed = sf::kernel_launches(sim) - launches;
  const auto replay = recorded.to_vector<double>();
  double replay_vs_cpu = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) replay_vs_cpu = worse(replay_vs_cpu, replay[i] - cpu[i]);
  fmt::print(
      "recorded as a graph: {} launches eager (the product by 2, the sum), {} replayed; "
      "max |replay - cpu| = {}\n",
      eager, replayed, replay_vs_cpu);
  return kernel_vs_cpu == 0 && sim_vs_cpu == 0 && replay_vs_cpu == 0 ? 0 : 1;
} catch (const std::exception& e) {
  return stepformer::demo::report_error("09_cuda", e);
}
