// What cuda-sim's execution model costs per CUDA thread: a kernel without barriers (each thread a plain call
// on a shared fiber), a __syncthreads crossed by every thread of a 256-thread block, and a warp shuffle per
// lane. These numbers are what an emulated kernel pays on top of its own arithmetic (docs/09_cuda.md, "Cost").
//
//   build/bench/bin/cudasim_bench
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <vector>

#include "cudasim/cudasim.h"
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cudasim_bench: what cuda-sim's emulation costs per CUDA thread (a plain kernel, a barrier, a shuffle)"};
  CLI11_PARSE(app, argc, argv);
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
}
