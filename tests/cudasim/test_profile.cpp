// The profiler (cudasim/profile.h) on kernels whose counts can be worked out by hand: a copy, strided copies,
// and a 32x32 tile transpose through shared memory with and without the padding column. Checking build only
// (tests/cudasim/checked.cmake): it needs the access hooks.
#include <catch2/catch_test_macros.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "cudasim/cudasim.h"
#include "cudasim/profile.h"

using cudasim::dim3;
using cudasim::launch;

namespace {

struct Device {
  float* data;
  explicit Device(std::size_t n) : data(static_cast<float*>(cudasim::device_allocate(n * sizeof(float)))) {
    std::vector<float> v(n);
    std::iota(v.begin(), v.end(), 0.f);
    cudasim::copy_to_device(data, v.data(), n * sizeof(float));
  }
  ~Device() { cudasim::device_free(data); }
};

__global__ void copy(const float* in, float* out, int stride) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i * static_cast<unsigned>(stride)];
}

template <int Width>
__global__ void transpose32(const float* in, float* out) {
  __shared__ float tile[32][Width];
  const unsigned tx = threadIdx.x, ty = threadIdx.y;
  tile[ty][tx] = in[ty * 32 + tx];  // a warp (fixed ty) writes one row: 32 consecutive words
  __syncthreads();
  out[ty * 32 + tx] = tile[tx][ty];  // a warp reads one column: words Width apart
}

// Profiles one launch of f and returns its counters.
template <class F>
cudasim::profile::Counters profiled(F f) {
  cudasim::profile::take();
  cudasim::profile::enable(true);
  f();
  cudasim::profile::enable(false);
  auto all = cudasim::profile::take();
  REQUIRE(all.size() == 1);
  return all[0];
}

}  // namespace

TEST_CASE("profile: a coalesced copy reads and writes 4 sectors per warp request", "[cudasim][profile][ch09]") {
  Device in(128), out(128);
  const auto c = profiled([&] { launch(copy, dim3(2), dim3(64), 0, in.data, out.data, 1); });
  CHECK(c.kernel == "copy");
  CHECK(c.launches == 1);
  CHECK(c.blocks == 2);
  CHECK(c.threads == 128);
  CHECK(c.global_load_requests == 4);  // 4 warps, one load each
  CHECK(c.global_load_sectors == 16);  // 32 lanes x 4 bytes = 128 bytes = 4 sectors of 32
  CHECK(c.global_store_requests == 4);
  CHECK(c.global_store_sectors == 16);
  CHECK(c.global_load_bytes == 512);
  CHECK(c.shared_load_requests == 0);
  CHECK(c.barriers == 0);
}

TEST_CASE("profile: strided reads touch more sectors per request", "[cudasim][profile][ch09]") {
  Device in(32 * 8), out(32);
  const auto two = profiled([&] { launch(copy, dim3(1), dim3(32), 0, in.data, out.data, 2); });
  CHECK(two.global_load_requests == 1);
  CHECK(two.global_load_sectors == 8);  // lanes 8 bytes apart: 256 bytes
  CHECK(two.global_store_sectors == 4);
  const auto eight = profiled([&] { launch(copy, dim3(1), dim3(32), 0, in.data, out.data, 8); });
  CHECK(eight.global_load_sectors == 32);  // lanes 32 bytes apart: a sector each
}

TEST_CASE("profile: a [32][32] tile read by columns has 31 bank conflicts per request, [32][33] none",
          "[cudasim][profile][ch09]") {
  Device in(32 * 32), out(32 * 32);
  const auto plain = profiled([&] { launch(transpose32<32>, dim3(1), dim3(32, 32), 0, in.data, out.data); });
  CHECK(plain.shared_store_requests == 32);
  CHECK(plain.shared_store_wavefronts == 32);  // rows: 32 consecutive words, one per bank
  CHECK(plain.shared_load_requests == 32);
  CHECK(plain.shared_load_wavefronts == 32 * 32);  // a column of [32][32]: 32 words, all in one bank
  CHECK(plain.shared_bank_conflicts == 32 * 31);
  CHECK(plain.barriers == 32);  // one __syncthreads, executed by 32 warps
  CHECK(plain.global_load_sectors == 32 * 4);
  const auto padded = profiled([&] { launch(transpose32<33>, dim3(1), dim3(32, 32), 0, in.data, out.data); });
  CHECK(padded.shared_load_wavefronts == 32);  // words 33 apart: 32 different banks
  CHECK(padded.shared_bank_conflicts == 0);
}

TEST_CASE("profile: stated FLOPs give the arithmetic intensity and the roofline's attainable rate",
          "[cudasim][profile][ch09]") {
  Device in(128), out(128);
  const auto c = profiled([&] {
    cudasim::profile::next_launch_flops(4096);
    launch(copy, dim3(2), dim3(64), 0, in.data, out.data, 1);
    launch(copy, dim3(2), dim3(64), 0, in.data, out.data, 1);  // states nothing: the FLOPs are not carried over
  });
  CHECK(c.launches == 2);
  CHECK(c.flops == 4096);
  CHECK(c.global_bytes() == 2 * 32 * 32);  // 16 sectors loaded and 16 stored, per launch
  CHECK(c.intensity() == 2.0);
  const auto& roof = cudasim::profile::kRoofline;
  CHECK(roof.attainable(2.0) == 2.0 * roof.bytes_per_second);  // below the ridge: memory bound
  CHECK(roof.attainable(1000.0) == roof.peak_flops);           // above it: compute bound
  const std::string j = cudasim::profile::json({c});
  CHECK(j.find("\"kernel\": \"copy\"") != std::string::npos);
  CHECK(j.find("\"flops\": 4096") != std::string::npos);
  CHECK(j.find("\"global_load_sectors\": 32") != std::string::npos);
  CHECK(j.find("\"flop_per_byte\": 2") != std::string::npos);
}

namespace {
__global__ void shared_doubles(double* out) {
  __shared__ double s[32];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = s[31 - threadIdx.x];
}
}  // namespace

TEST_CASE("profile: a warp's 32 neighbouring doubles take 2 wavefronts and no bank conflict",
          "[cudasim][profile][ch09]") {
  double* out = static_cast<double*>(cudasim::device_allocate(32 * sizeof(double)));
  const auto c = profiled([&] { launch(shared_doubles, dim3(1), dim3(32), 0, out); });
  cudasim::device_free(out);
  CHECK(c.shared_store_wavefronts == 2);  // 64 words: every bank serves 2, as 256 bytes need
  CHECK(c.shared_load_wavefronts == 2);
  CHECK(c.shared_bank_conflicts == 0);
}
