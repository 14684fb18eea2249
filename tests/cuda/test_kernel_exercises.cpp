// Chapter 09's kernel exercises graded on what cuda-sim counts (docs/09_cuda.md, "Profiling"): a correct
// kernel is not enough, it must also move memory the way the chapter teaches. Each test runs the learner's
// kernel with every check on (racecheck, memcheck, initcheck, synccheck) under a seeded random schedule,
// compares its values with the CPU's, then holds its counters to stated targets; a failure prints the
// counts beside the targets. Checking build only (tests/CMakeLists.txt): the counters need the access hooks.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>

#include "counted.h"
#include "ladders.h"

using namespace stepformer;
using namespace stepformer::test::counted;
using cudasim::profile::Counters;
using stepformer::test::close;

TEST_CASE("ex9.2: the tiled GEMM (v2) is right, loads each element once per tile, coalesced, without bank conflicts",
          "[ex9.2][cuda]") {
  const auto gemm = [](const Tensor& a, const Tensor& b) {
    Tensor c = full({a.shape()[0], b.shape()[1]}, NAN, {DType::float32, kSim});  // beta 0: c is never read
    cuda_sim::gemm_version(2, c.desc(), a.to(kSim).desc(), b.to(kSim).desc(), 1.0, 0.0);
    return c.cpu();
  };
  // Odd sizes: partial tiles on every side, K not a multiple of 16.
  const Tensor a_odd = cpu_input({37, 29}, 1), b_odd = cpu_input({29, 45}, 2);
  Tensor odd;
  counted("gemm_v2", [&] { odd = gemm(a_odd, b_odd); });
  INFO("the values of c = a b against the CPU's matmul (37x29 times 29x45: partial tiles on every side)");
  CHECK(close(odd, matmul(a_odd, b_odd), 1e-5, 1e-5));

  // 64 x 64 x 64, row-major: 16 blocks of 8 warps, 4 steps along K.
  const Tensor a = cpu_input({64, 64}, 3), b = cpu_input({64, 64}, 4);
  Tensor c;
  const Counters n = counted("gemm_v2", [&] { c = gemm(a, b); });
  CHECK(close(c, matmul(a, b), 1e-5, 1e-5));
  const std::uint64_t warps = 16 * 8, steps = 64 / 16;
  {
    INFO("global load requests " << n.global_load_requests << ", target <= " << 2 * warps * steps
                                 << " (each warp loads one row-pair of the a tile and of the b tile per step; "
                                    "reading a and b straight from global memory takes 16 times more)");
    CHECK(n.global_load_requests <= 2 * warps * steps);
  }
  {
    INFO("sectors per request " << per_request(n.global_load_sectors, n.global_load_requests)
                                << ", target <= 4 (a warp is two rows of 16 threads: neighbouring tx must load "
                                   "neighbouring columns, 2 x 64 bytes)");
    CHECK(per_request(n.global_load_sectors, n.global_load_requests) <= 4.0);
  }
  {
    INFO("shared bank conflicts " << n.shared_bank_conflicts
                                  << ", target 0 (a warp stores a row-pair of a tile and reads a row of b_tile)");
    CHECK(n.shared_bank_conflicts == 0);
  }
}

TEST_CASE("ex9.3: the block reduction is right, reads coalesced, with warp shuffles and at most 3 barriers",
          "[ex9.3][cuda]") {
  // Rows of 1000 take the block path (one block of 256 threads per row: reduce.cu); 8 rows.
  const Tensor x = cpu_input({8, 1000}, 5);
  Tensor s;
  const Counters n = counted("reduce_kernel<float", [&] { s = sum(x.to(kSim), {1}).cpu(); });
  CHECK(close(s, sum(x, {1}), 1e-5, 1e-5));
  Tensor m;
  counted("reduce_kernel<float", [&] { m = max(x.to(kSim), {1}).cpu(); });
  CHECK(close(m, max(x, {1}), 0, 0));
  const std::uint64_t warps = 8 * 8;
  {
    INFO("sectors per request " << per_request(n.global_load_sectors, n.global_load_requests)
                                << ", target <= 4 (thread t reads elements t, t + blockDim.x, ...: a warp reads 32 "
                                   "neighbours at once)");
    CHECK(per_request(n.global_load_sectors, n.global_load_requests) <= 4.0);
  }
  {
    INFO("shared bank conflicts " << n.shared_bank_conflicts << ", target 0");
    CHECK(n.shared_bank_conflicts == 0);
  }
  {
    INFO("barriers " << n.barriers << " (counted per warp), target <= " << 3 * warps
                     << ": 3 __syncthreads per block; a tree in shared memory needs log2(256) = 8");
    CHECK(n.barriers <= 3 * warps);
  }
  {
    INFO("shared requests " << n.shared_load_requests + n.shared_store_requests << ", target <= " << 3 * warps
                            << " (one partial per warp: the shuffles combine the lanes)");
    CHECK(n.shared_load_requests + n.shared_store_requests <= 3 * warps);
  }
}

TEST_CASE("ex9.4: the tiled transpose is right, coalesced on both sides, without bank conflicts", "[ex9.4][cuda]") {
  // contiguous() of a transposed matrix: out [64, 96] from in [96, 64] read by columns.
  const Tensor x = cpu_input({96, 64}, 6);
  Tensor t;
  const Counters n = counted("transpose_kernel", [&] { t = contiguous(transpose(x.to(kSim), 0, 1)).cpu(); });
  CHECK(t.to_vector<float>() == contiguous(transpose(x, 0, 1)).to_vector<float>());
  // Odd sizes and a batch whose middle dimension broadcasts (stride 0).
  const Tensor y = cpu_input({3, 45, 70}, 7);
  const auto odd = [](const Tensor& v) { return contiguous(transpose(expand(unsqueeze(v, 1), {3, 2, 45, 70}), 2, 3)); };
  Tensor u;
  counted("transpose_kernel", [&] { u = odd(y.to(kSim)).cpu(); });
  CHECK(u.to_vector<float>() == odd(y).to_vector<float>());
  {
    INFO("load sectors per request " << per_request(n.global_load_sectors, n.global_load_requests)
                                     << ", target 4 (lanes read along in's contiguous direction)");
    CHECK(per_request(n.global_load_sectors, n.global_load_requests) <= 4.0);
  }
  {
    INFO("store sectors per request " << per_request(n.global_store_sectors, n.global_store_requests)
                                      << ", target 4 (lanes write along a row of out)");
    CHECK(per_request(n.global_store_sectors, n.global_store_requests) <= 4.0);
  }
  {
    INFO("shared bank conflicts " << n.shared_bank_conflicts
                                  << ", target 0 (a column of a [32][32] tile sits in one bank)");
    CHECK(n.shared_bank_conflicts == 0);
  }
}
