// The kernel ladders (autograd/backends/cuda/ladders.h) hold what their comments claim: each version fixes,
// in cuda-sim's counts, what the comment says it fixes over the version before, and keeps what it does not
// claim to change. The problems are ladder_problems.h's, the ones bench/ladder_bench.cpp counts for
// docs/09_cuda.md; every version's values are checked here under every check (a race or an out-of-bounds access
// fails the launch), and against the CPU on odd sizes in test_cuda_backend.cpp. Checking build only.
#include "counted.h"
#include "ladder_problems.h"

using namespace stepformer;
using namespace stepformer::test::counted;
using cudasim::profile::Counters;
using stepformer::test::close;

namespace {

double load_sectors(const Counters& n) { return per_request(n.global_load_sectors, n.global_load_requests); }
double store_sectors(const Counters& n) { return per_request(n.global_store_sectors, n.global_store_requests); }

// Every version of the family's problem with every check on, its output checked against the CPU's; the
// counters of each, indexed by version.
std::vector<Counters> climb(const std::string& family) {
  const std::vector<ladders::Problem> all = ladders::problems(kSim);
  const ladders::Problem& p = ladders::problem(all, family);
  std::vector<Counters> v(static_cast<std::size_t>(p.last) + 1);
  for (int version = p.first; version <= p.last; ++version) {
    const Tensor y = p.output(kSim);
    v[static_cast<std::size_t>(version)] = counted(p.kernel(version), [&] { p.run(version, y); });
    INFO(p.title << ": version " << version << " computes the CPU's answer");
    CHECK(close(y.cpu(), p.expected, p.tolerance, p.tolerance));
  }
  return v;
}

}  // namespace

TEST_CASE("the softmax ladder: v2 coalesces v1's loads; v3 drops v2's barriers and shared memory", "[cuda][ladder]") {
  const std::vector<Counters> v = climb("softmax");
  INFO("sectors per load request: v1 " << load_sectors(v[1]) << ", v2 " << load_sectors(v[2]) << ", v3 "
                                       << load_sectors(v[3]));
  CHECK(load_sectors(v[1]) > 16);    // a lane per row: lanes 4 KB apart
  CHECK(load_sectors(v[2]) <= 4.0);  // 32 neighbours per warp
  CHECK(load_sectors(v[3]) <= 4.0);
  INFO("barriers (per warp): v2 " << v[2].barriers << ", v3 " << v[3].barriers << "; shared requests v3 "
                                  << v[3].shared_load_requests + v[3].shared_store_requests);
  CHECK(v[2].barriers > 0);
  CHECK(v[3].barriers == 0);
  CHECK(v[3].shared_load_requests + v[3].shared_store_requests == 0);
}

TEST_CASE("the row-sum ladder: v2 coalesces v1; v3 removes v2's bank conflicts; v4 most of v3's barriers",
          "[cuda][ladder]") {
  const std::vector<Counters> v = climb("row_sum");
  INFO("sectors per load request: v1 " << load_sectors(v[1]) << ", v2 " << load_sectors(v[2]));
  CHECK(load_sectors(v[1]) > 16);
  CHECK(load_sectors(v[2]) <= 4.0);
  INFO("bank conflicts: v2 " << v[2].shared_bank_conflicts << ", v3 " << v[3].shared_bank_conflicts << ", v4 "
                             << v[4].shared_bank_conflicts);
  CHECK(v[2].shared_bank_conflicts > 0);   // interleaved addressing: words 2 s apart
  CHECK(v[3].shared_bank_conflicts == 0);  // sequential addressing
  CHECK(v[4].shared_bank_conflicts == 0);
  INFO("barriers (per warp): v2 " << v[2].barriers << ", v3 " << v[3].barriers << ", v4 " << v[4].barriers);
  CHECK(v[3].barriers == v[2].barriers);      // v3 changes the addressing, not the steps
  CHECK(3 * v[4].barriers <= v[3].barriers);  // 3 per row instead of 10
}

TEST_CASE("the transpose ladder: v2 coalesces v1's reads through a tile; v3 pads away v2's bank conflicts",
          "[cuda][ladder]") {
  const std::vector<Counters> v = climb("transpose");
  INFO("sectors per request, loads / stores: v1 " << load_sectors(v[1]) << " / " << store_sectors(v[1]) << ", v2 "
                                                  << load_sectors(v[2]) << " / " << store_sectors(v[2]));
  CHECK(load_sectors(v[1]) > 16);  // 32 consecutive c, ld elements apart
  CHECK(store_sectors(v[1]) <= 4.0);
  CHECK(load_sectors(v[2]) <= 4.0);
  CHECK(store_sectors(v[2]) <= 4.0);
  INFO("bank conflicts: v2 " << v[2].shared_bank_conflicts << ", v3 " << v[3].shared_bank_conflicts);
  CHECK(v[2].shared_bank_conflicts > 0);  // a column of [32][32] is one bank
  CHECK(v[3].shared_bank_conflicts == 0);
}

TEST_CASE(
    "the GEMM ladder: v2 reads global memory 16 times less than v1; v3 makes 4 times the arithmetic of v2 "
    "per shared-memory read; v4's 128x128 tile reads global memory half as often as v3's 64x64; v5's ldmatrix "
    "and 64x64 per warp make a quarter of v4's shared reads or fewer, without bank conflicts, and its cp.async "
    "pipeline passes one barrier per step of k where v4 passes two; v6's wgmma leaves the operands' shared-memory "
    "reads to the tensor cores: no load request of the warps' own, no bank conflicts, on v5's tiles and barriers",
    "[cuda][ladder]") {
  const std::vector<Counters> v = climb("gemm"), bf = climb("gemm_bf16");
  INFO("global load requests: v1 " << v[1].global_load_requests << ", v2 " << v[2].global_load_requests);
  CHECK(v[1].global_load_requests >= 15 * v[2].global_load_requests);  // a 16x16 tile: each element read 16x less
  INFO("shared load requests: v2 " << v[2].shared_load_requests << ", v3 " << v[3].shared_load_requests);
  CHECK(v[2].shared_load_requests >= 4 * v[3].shared_load_requests);  // 16 FMAs per 4 + 4 values, not 1 per 2
  INFO("global bytes loaded, bfloat16 operands: v3 " << bf[3].global_load_bytes << ", v4 " << bf[4].global_load_bytes);
  CHECK(bf[3].global_load_bytes >= 2 * bf[4].global_load_bytes);
  INFO("shared load requests, bfloat16 operands: v4 " << bf[4].shared_load_requests << ", v5 "
                                                      << bf[5].shared_load_requests << "; v5's bank conflicts "
                                                      << bf[5].shared_bank_conflicts);
  CHECK(4 * bf[5].shared_load_requests <= bf[4].shared_load_requests);  // 8 ldmatrix per 32 mma, v4: 24 per 16
  CHECK(bf[5].shared_bank_conflicts == 0);                              // 8 rows of 80 (or 272) bytes: 32 banks
  CHECK(bf[5].global_load_bytes == bf[4].global_load_bytes);            // the same 128x128 tile
  const auto per_warp = [](const Counters& n) { return n.barriers / (n.threads / 32); };
  const std::uint64_t steps = 128 / 32;  // K over the 32 of k both stage per step
  INFO("barriers per warp: v4 " << per_warp(bf[4]) << ", v5 " << per_warp(bf[5]) << " (" << steps << " steps)");
  CHECK(per_warp(bf[4]) == 2 * steps);
  CHECK(per_warp(bf[5]) == steps + 1);  // and one before the next batch reuses the stages
  INFO("v6: shared load requests " << bf[6].shared_load_requests << ", bank conflicts " << bf[6].shared_bank_conflicts
                                   << ", global bytes loaded " << bf[6].global_load_bytes << ", barriers per warp "
                                   << per_warp(bf[6]));
  CHECK(bf[6].shared_load_requests == 0);   // the tensor cores read both operands through their descriptors
  CHECK(bf[6].shared_bank_conflicts == 0);  // a phase of copies lands in 8 rows of one core matrix: 128 bytes
  CHECK(bf[6].global_load_bytes == bf[5].global_load_bytes);  // v5's 128x128 tile, staged by v5's copies
  CHECK(per_warp(bf[6]) == steps + 1);
}

TEST_CASE("GEMM v3 stages transposed operands along their contiguous dimension: coalesced, without bank conflicts",
          "[cuda][ladder]") {
  // A layer's forward multiplies by the weight's transpose (b contiguous along k), its weight gradient by the
  // activations' transpose (a contiguous along m): each staged as quickly as row-major operands.
  const std::int64_t n = 128;
  const Tensor a = cpu_input({n, n}, 26), b = cpu_input({n, n}, 27);
  const auto gemm = ladders::kernels_of(kSim).gemm;
  Counters rows, transposed;
  for (const bool t : {false, true}) {
    const Tensor a_dev = t ? transpose(a.to(kSim), 0, 1) : a.to(kSim),
                 b_dev = t ? transpose(b.to(kSim), 0, 1) : b.to(kSim);
    const Tensor c = full({n, n}, NAN, {DType::float32, kSim});
    (t ? transposed : rows) = counted("gemm_v3", [&] { gemm(3, c.desc(), a_dev.desc(), b_dev.desc(), 1.0, 0.0); });
    const Tensor want = t ? matmul(transpose(a, 0, 1), transpose(b, 0, 1)) : matmul(a, b);
    INFO((t ? "a^T b^T" : "a b") << ": v3 computes the CPU's answer");
    CHECK(close(c.cpu(), want, 1e-4, 1e-4));
  }
  INFO("load sectors per request: a b " << load_sectors(rows) << ", a^T b^T " << load_sectors(transposed)
                                        << "; bank conflicts " << rows.shared_bank_conflicts << ", "
                                        << transposed.shared_bank_conflicts);
  CHECK(load_sectors(transposed) <= load_sectors(rows));
  CHECK(transposed.global_load_requests == rows.global_load_requests);
  CHECK(rows.shared_bank_conflicts == 0);  // tile rows padded by 4: 8 values of k at one m fall in 8 banks
  CHECK(transposed.shared_bank_conflicts == 0);
}
