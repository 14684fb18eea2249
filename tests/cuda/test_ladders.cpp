// The kernel ladders (autograd/backends/cuda/ladders.h) hold what their comments claim: each version fixes,
// in cuda-sim's counts, what the comment says it fixes over the version before, and keeps what it does not
// claim to change. Values are checked against the CPU in test_cuda_backend.cpp; here they are checked once
// more under every check (a race or an out-of-bounds access fails the launch). Checking build only.
#include "counted.h"
#include "ladders.h"

using namespace stepformer;
using namespace stepformer::test::counted;
using cudasim::profile::Counters;
using stepformer::test::close;

namespace {

namespace ladder = stepformer::cuda_sim;

double load_sectors(const Counters& n) { return per_request(n.global_load_sectors, n.global_load_requests); }
double store_sectors(const Counters& n) { return per_request(n.global_store_sectors, n.global_store_requests); }

}  // namespace

TEST_CASE("the softmax ladder: v2 coalesces v1's loads; v3 drops v2's barriers and shared memory", "[cuda][ladder]") {
  const Tensor x = cpu_input({64, 512}, 21), expected = softmax(x, -1);
  Counters v[4];
  const char* names[4] = {"", "softmax_v1", "softmax_v2", "softmax_forward_kernel<float"};
  for (int version = 1; version <= ladder::kSoftmaxVersions; ++version) {
    Tensor y = full({64, 512}, NAN, {DType::float32, kSim});
    v[version] = counted(names[version], [&] { ladder::softmax_version(version, y.desc(), x.to(kSim).desc()); });
    CHECK(close(y.cpu(), expected, 1e-5, 1e-5));
  }
  INFO("sectors per load request: v1 " << load_sectors(v[1]) << ", v2 " << load_sectors(v[2]) << ", v3 "
                                       << load_sectors(v[3]));
  CHECK(load_sectors(v[1]) > 16);    // a lane per row: lanes 2 KB apart
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
  const Tensor x = cpu_input({32, 2048}, 22), expected = sum(x, {1});
  Counters v[5];
  for (int version = 1; version <= ladder::kRowSumVersions; ++version) {
    Tensor y = full({32}, NAN, {DType::float32, kSim});
    v[version] = counted("row_sum_v" + std::to_string(version),
                         [&] { ladder::row_sum_version(version, y.desc(), x.to(kSim).desc()); });
    CHECK(close(y.cpu(), expected, 1e-4, 1e-4));
  }
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
  const Tensor x = cpu_input({96, 160}, 23), expected = contiguous(transpose(x, 0, 1));
  Counters v[4];
  const char* names[4] = {"", "transpose_v1", "transpose_v2", "transpose_kernel"};
  for (int version = 1; version <= ladder::kTransposeVersions; ++version) {
    Tensor y = full({160, 96}, NAN, {DType::float32, kSim});
    const Tensor in = transpose(x.to(kSim), 0, 1);
    v[version] = counted(names[version], [&] { ladder::transpose_version(version, y.desc(), in.desc()); });
    CHECK(y.cpu().to_vector<float>() == expected.to_vector<float>());
  }
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
