// What cuda-sim's execution model costs per CUDA thread: a kernel without barriers (each thread a plain call
// on a shared fiber), a __syncthreads crossed by every thread of a 256-thread block, and a warp shuffle per
// lane. These numbers are what an emulated kernel pays on top of its own arithmetic (docs/09_cuda.md, "Cost").
//
//   build/bench/bin/cudasim_bench
#include <fmt/format.h>

#include <functional>
#include <vector>

#include "autograd/autograd.h"
#include "cudasim/check.h"
#include "cudasim/cudasim.h"
#include "cudasim/profile.h"
#include "ladders.h"
#include "timing.h"

using cudasim::dim3;
using cudasim::launch;
using namespace stepformer;

namespace {

constexpr int kBlock = 256, kRounds = 64;

__global__ void no_barrier(float* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = 1.f; }

__global__ void barriers(float* out) {
  __shared__ float s[kBlock];
  float acc = 0;
  for (int i = 0; i < kRounds; ++i) {
    s[threadIdx.x] = acc;
    __syncthreads();
    acc += s[(threadIdx.x + 1) % kBlock];
    __syncthreads();
  }
  out[threadIdx.x] = acc;
}

__global__ void shuffles(float* out) {
  float v = static_cast<float>(threadIdx.x);
  for (int i = 0; i < kRounds; ++i) v += __shfl_xor_sync(0xffffffffu, v, 1 << (i % 5));
  out[threadIdx.x] = v;
}

// The counters of each version's launch: one table per ladder, a row per version (the kernels' own names).
void print_ladders() {
  if (!cudasim::check::instrumented()) {
    fmt::print(
        "\nkernel ladders: the profiler's counts need the checking build (build/cudasim-check/bin/cudasim_bench)\n");
    return;
  }
  namespace ladder = stepformer::cuda_sim;
  const Device sim{DeviceType::cuda_sim, 0};
  Generator gen(1);
  auto input = [&](const Shape& shape) { return uniform(shape, -1.0, 1.0, gen, {DType::float32, kCPU}).to(sim); };
  auto profiled = [](const char* title, int versions, const std::function<void(int)>& run) {
    std::vector<cudasim::profile::Counters> rows;
    for (int v = 1; v <= versions; ++v) {
      cudasim::profile::take();
      cudasim::profile::enable(true);
      run(v);
      cudasim::profile::enable(false);
      for (const auto& c : cudasim::profile::take()) rows.push_back(c);
    }
    fmt::print("\n{}\n{}", title, cudasim::profile::table(rows));
  };
  const Tensor x = input({256, 1024});
  Tensor y = empty({256, 1024}, {DType::float32, sim});
  profiled("softmax over 256 rows of 1024 floats, versions 1-3:", ladder::kSoftmaxVersions,
           [&](int v) { ladder::softmax_version(v, y.desc(), x.desc()); });
  const Tensor rows = input({64, 4096});
  Tensor sums = empty({64}, {DType::float32, sim});
  profiled("the sums of 64 rows of 4096 floats, versions 1-4:", ladder::kRowSumVersions,
           [&](int v) { ladder::row_sum_version(v, sums.desc(), rows.desc()); });
  const Tensor m = transpose(input({512, 512}), 0, 1);
  Tensor t = empty({512, 512}, {DType::float32, sim});
  profiled("contiguous() of a transposed 512x512 float matrix, versions 1-3:", ladder::kTransposeVersions,
           [&](int v) { ladder::transpose_version(v, t.desc(), m.desc()); });
}

}  // namespace

int main() {
  const unsigned blocks = 1024;
  std::vector<float> out(std::size_t{blocks} * kBlock);
  const double plain = bench::best_seconds([&] { launch(no_barrier, dim3(blocks), dim3(kBlock), 0, out.data()); });
  const double sync = bench::best_seconds([&] { launch(barriers, dim3(1), dim3(kBlock), 0, out.data()); });
  const double shfl = bench::best_seconds([&] { launch(shuffles, dim3(1), dim3(kBlock), 0, out.data()); });
  fmt::print("cuda-sim, one OS thread (best of several runs):\n");
  fmt::print("  a thread of a kernel without barriers   {:6.1f} ns\n", plain * 1e9 / (blocks * kBlock));
  fmt::print("  a thread crossing a __syncthreads       {:6.1f} ns  (block of {})\n",
             sync * 1e9 / (kBlock * 2.0 * kRounds), kBlock);
  fmt::print("  a lane taking part in a warp shuffle    {:6.1f} ns\n", shfl * 1e9 / (kBlock * double{kRounds}));
  print_ladders();
}
