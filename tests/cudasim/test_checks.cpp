// The checker (cudasim/check.h) on known-bad kernels, in the checking build only (tests/cudasim/checked.cmake):
// each bug is reported with its checker, kind, kernel, threads and location, under every schedule; the same
// kernel fixed is clean under every schedule with every check on. This file is instrumented as the
// project's kernels are: the kernels below are plain CUDA.
#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <string>
#include <vector>

#include "check_test_helpers.h"

using cudasim::dim3;
using cudasim::launch;
using cudasim::check::Report;
using namespace checks_test;

namespace {

// 1. A shared-memory tile reversed without the barrier between writing and reading it.
constexpr unsigned kTileThreads = 64;
constexpr int kReverseTileWriteLine = __LINE__ + 4;  // the reports name source lines: `tile[t] = in[t]`
__global__ void reverse_tile(const float* in, float* out, bool with_barrier) {
  __shared__ float tile[kTileThreads];
  const unsigned t = threadIdx.x;
  tile[t] = in[t];
  if (with_barrier) __syncthreads();
  out[t] = tile[kTileThreads - 1 - t];
}

// 2. Every block adds its value into one global total: without an atomic, blocks race.
__global__ void add_block_values(const float* in, float* total, bool atomic) {
  if (threadIdx.x != 0) return;
  if (atomic)
    atomicAdd(total, in[blockIdx.x]);
  else
    *total += in[blockIdx.x];
}

// 3. One thread per row sums its row, reading one element too many (k <= cols).
// 4b. Each thread writes the element `shift` after its own in a tile of dynamic shared memory sized for the block.
__global__ void shift_into_tile(float* out, int shift) {
  CUDASIM_DYNAMIC_SHARED(float, tile);
  tile[static_cast<int>(threadIdx.x) + shift] = 1.f;
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x];
}

// 4c. The same in static shared memory, with a second array of the same size declared right after the first:
// 64 bytes each, so no alignment padding lies between them and only cuda-sim's gaps separate them.
__global__ void shift_into_static_tile(float* out, int shift) {
  __shared__ float first[16];
  __shared__ float second[16];
  second[threadIdx.x] = 2.f;
  first[static_cast<int>(threadIdx.x) + shift] = 1.f;
  __syncthreads();
  out[threadIdx.x] = first[threadIdx.x] + second[threadIdx.x];
}

constexpr int kRowSumsReadLine = __LINE__ + 5;  // the loop that reads m
__global__ void row_sums(const float* m, float* out, int rows, int cols, bool off_by_one) {
  const int r = static_cast<int>(threadIdx.x);
  if (r >= rows) return;
  float s = 0;
  for (int k = 0; k < cols + (off_by_one ? 1 : 0); ++k) s += m[r * cols + k];
  out[r] = s;
}

// 1c. A tile of 64 floats filled twice by cp.async (threads 0-15 copy 16 bytes each) and read mirrored after each
// fill. Started before the barrier that ends the first reads (and waited for after it), the second fill may land
// while other threads still read the first: a GPU moves the bytes at any moment from the copy to the wait.
__global__ void refill_tile(const float* in, float* out, bool copy_before_barrier) {
  alignas(16) __shared__ float tile[64];
  const unsigned t = threadIdx.x;
  cudasim::AsyncCopies<1> copies;
  const auto fill = [&](int round) {
    if (t < 16) copies.copy16(tile + 4 * t, in + 64 * round + 4 * t, true);
    copies.commit();
  };
  fill(0);
  copies.wait<0>();
  __syncthreads();
  out[t] = tile[63 - t];
  if (copy_before_barrier) fill(1);
  __syncthreads();
  if (!copy_before_barrier) fill(1);
  copies.wait<0>();
  __syncthreads();
  out[64 + t] = tile[63 - t];
}

// 4. Four floats at once through a 16-byte vector load, from an address that is not a multiple of 16.
typedef float Float4 __attribute__((vector_size(16)));
__global__ void load_vectors(const float* in, float* out, int first) {
  const Float4 v = *reinterpret_cast<const Float4*>(in + first + 4 * threadIdx.x);
  out[threadIdx.x] = v[0] + v[1] + v[2] + v[3];
}

// 5. A three-point sum through shared memory: the halo element tile[32] is read, but only written when the
// kernel is fixed.
constexpr int kThreePointReadLine = __LINE__ + 8;  // `out[t] = tile[t] + ...`
__global__ void three_point_sum(const float* in, float* out, bool write_halo) {
  __shared__ float tile[34];
  const unsigned t = threadIdx.x;
  tile[t + 1] = in[t + 1];
  if (write_halo && t == 0) tile[0] = in[0], tile[33] = in[33];
  if (!write_halo && t == 0) tile[0] = in[0];
  __syncthreads();
  out[t] = tile[t] + tile[t + 1] + tile[t + 2];
}

// 6. A barrier that only half the block reaches.
__global__ void half_block_barrier(const float* in, float* out, bool fixed) {
  __shared__ float s[32];
  const unsigned t = threadIdx.x;
  if (fixed) {
    if (t < 16) s[t] = in[t];
    __syncthreads();
    if (t < 16) out[t] = s[15 - t];
  } else if (t < 16) {
    s[t] = in[t];
    __syncthreads();
    out[t] = s[15 - t];
  }
}

// 7. One warp's shuffle, written twice in two branches: lanes meet at two different call sites.
__global__ void split_shuffle(const float* in, float* out, bool fixed) {
  const unsigned lane = threadIdx.x;
  float v = in[lane];
  if (fixed) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
  } else if (lane < 16) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
  } else {
    v -= __shfl_xor_sync(0xffffffffu, v, 1);
  }
  out[lane] = v;
}

// 7b. Lanes 0-15 shuffle among themselves (mask 0x0000ffff) but read lane + `offset`: 16 reaches outside.
constexpr unsigned kOutsideMaskLine = __LINE__ + 4;
__global__ void shuffle_outside_mask(const float* in, float* out, int offset) {
  const unsigned lane = threadIdx.x;
  float v = in[lane];
  if (lane < 16) v = __shfl_sync(0x0000ffffu, v, static_cast<int>(lane) + offset);
  out[lane] = v;
}

// 8. Thread 0 publishes a value that thread 1 reads, in global memory, with or without a barrier between.
__global__ void publish(float* slot, float* out, bool with_barrier) {
  if (threadIdx.x == 0) slot[0] = 42.f;
  if (with_barrier) __syncthreads();
  if (threadIdx.x == 1) out[0] = slot[0];
}

}  // namespace

TEST_CASE("cuda-sim checks need the checking build, and this is it", "[cudasim][check][ch09]") {
  CHECK(cudasim::check::instrumented());
}

TEST_CASE("racecheck: a missing __syncthreads in a shared-memory tile", "[cudasim][check][ch09]") {
  DeviceArray<float> in(iota(kTileThreads)), out(kTileThreads);
  const auto bad =
      under_every_schedule([&] { launch(reverse_tile, dim3(1), dim3(kTileThreads), 0, in.data, out.data, false); });
  for (const auto& reports : bad) {
    INFO(all_messages(reports));
    const Report* r = find(reports, "racecheck");
    REQUIRE(r != nullptr);
    CHECK(r->kernel == "reverse_tile");
    CHECK(contains(r->location, "shared tile + element "));
    CHECK(r->has_other);
    CHECK(same(r->block, 0));
    CHECK(r->thread.x + r->other_thread.x == kTileThreads - 1);  // a thread and its mirror
  }
  // Forward: threads 0-31 read tile[63..32] before anyone wrote them; the first hazard is thread 32 writing
  // tile[32], which thread 31 read. Threads 32-63 then read what threads 31-0 wrote: read-after-write.
  const Report* first = find(bad[0], "racecheck");
  REQUIRE(first != nullptr);
  CHECK(first->kind == "write-after-read");
  CHECK(same(first->thread, 32));
  CHECK(same(first->other_thread, 31));
  CHECK(first->location == "shared tile + element 32");
  CHECK(contains(first->message, "(at reverse_tile+0x"));
  CHECK(contains(first->message, ", test_checks.cpp:" + std::to_string(kReverseTileWriteLine) + ")"));
  CHECK(contains(all_messages(bad[0]), "racecheck: read-after-write"));
  CHECK(contains(all_messages(bad[0]), "initcheck: uninitialised read"));  // and thread 0 read tile[63] unwritten
  // Reverse: the mirror image.
  const Report* second = find(bad[1], "racecheck");
  REQUIRE(second != nullptr);
  CHECK(second->kind == "write-after-read");
  CHECK(same(second->thread, 31));
  CHECK(same(second->other_thread, 32));

  const auto fixed =
      under_every_schedule([&] { launch(reverse_tile, dim3(1), dim3(kTileThreads), 0, in.data, out.data, true); });
  for (const auto& reports : fixed) CHECK(all_messages(reports).empty());
  CHECK(out.host()[0] == kTileThreads - 1);
}

TEST_CASE("racecheck: blocks adding into one global total without an atomic", "[cudasim][check][ch09]") {
  DeviceArray<float> in(std::vector<float>{1, 2, 3, 4}), total(std::vector<float>{0});
  const auto bad =
      under_every_schedule([&] { launch(add_block_values, dim3(4), dim3(32), 0, in.data, total.data, false); });
  for (const auto& reports : bad) {
    INFO(all_messages(reports));
    const Report* r = find(reports, "racecheck");
    REQUIRE(r != nullptr);
    CHECK(r->kind == "read-after-write");  // block 1 reads what block 0 wrote
    CHECK(r->kernel == "add_block_values");
    CHECK(same(r->block, 1));
    CHECK(same(r->thread, 0));
    CHECK(same(r->other_block, 0));
    CHECK(same(r->other_thread, 0));
    CHECK(contains(r->location, "(4 bytes) + element 0"));
    CHECK(contains(r->message, "blocks are not ordered"));
  }
  const auto fixed =
      under_every_schedule([&] { launch(add_block_values, dim3(4), dim3(32), 0, in.data, total.data, true); });
  for (const auto& reports : fixed) CHECK(all_messages(reports).empty());
}

TEST_CASE("racecheck: a cp.async started before the barrier that ends the reads of its tile",
          "[cudasim][check][ch09]") {
  DeviceArray<float> in(iota(128)), out(128);
  const auto bad = under_every_schedule([&] { launch(refill_tile, dim3(1), dim3(64), 0, in.data, out.data, true); });
  for (const auto& reports : bad) {
    INFO(all_messages(reports));
    const Report* r = find(reports, "racecheck");
    REQUIRE(r != nullptr);
    CHECK(r->kernel == "refill_tile");
    CHECK(contains(r->location, "shared tile + element "));
    // The write is where the copy starts (the wait lands the bytes after the barrier, ordered): by schedule, a
    // read of the first fill before or after it.
    CHECK((r->kind == "write-after-read" || r->kind == "read-after-write"));
    CHECK(r->has_other);
    CHECK((r->kind == "write-after-read" ? r->thread.x : r->other_thread.x) < 16);  // a copying thread
  }
  const auto fixed = under_every_schedule([&] { launch(refill_tile, dim3(1), dim3(64), 0, in.data, out.data, false); });
  for (const auto& reports : fixed) CHECK(all_messages(reports).empty());
  const std::vector<float> got = out.host();
  CHECK(got[0] == 63.f);
  CHECK(got[64] == 127.f);
}

TEST_CASE("racecheck: a global value published by one thread and read by another of its block",
          "[cudasim][check][ch09]") {
  DeviceArray<float> slot(std::vector<float>{0}), out(std::vector<float>{0});
  const auto bad = under_every_schedule([&] { launch(publish, dim3(1), dim3(32), 0, slot.data, out.data, false); });
  for (const auto& reports : bad) {
    INFO(all_messages(reports));
    const Report* r = find(reports, "racecheck");
    REQUIRE(r != nullptr);
    CHECK((r->kind == "read-after-write" || r->kind == "write-after-read"));
    CHECK(contains(r->message, "with no barrier between"));
  }
  const auto fixed = under_every_schedule([&] { launch(publish, dim3(1), dim3(32), 0, slot.data, out.data, true); });
  for (const auto& reports : fixed) CHECK(all_messages(reports).empty());
}

TEST_CASE("memcheck: a row read one element past its end", "[cudasim][check][ch09]") {
  const int rows = 5, cols = 7;
  DeviceArray<float> m(iota(rows * cols)), out(static_cast<std::size_t>(rows));
  // The access does not happen: the launch ends, as a trap ends a grid, and the host gets CheckError.
  const auto bad = under_every_schedule([&] {
    CHECK_THROWS_AS(launch(row_sums, dim3(1), dim3(32), 0, m.data, out.data, rows, cols, true),
                    cudasim::check::CheckError);
  });
  for (const auto& reports : bad) {
    INFO(all_messages(reports));
    REQUIRE(reports.size() == 1);
    const Report& r = reports[0];
    CHECK(r.checker == "memcheck");
    CHECK(r.kind == "out of bounds");
    CHECK(r.kernel == "row_sums");
    CHECK(same(r.thread, rows - 1));  // only the last row's extra element is outside the allocation
    CHECK(contains(r.location, "0 bytes past the end of allocation"));
    CHECK(contains(r.location, "(140 bytes)"));
    CHECK(contains(r.message, "(at row_sums+0x"));
    CHECK(contains(r.message, ", test_checks.cpp:" + std::to_string(kRowSumsReadLine) + ")"));
  }
  const auto fixed =
      under_every_schedule([&] { launch(row_sums, dim3(1), dim3(32), 0, m.data, out.data, rows, cols, false); });
  for (const auto& reports : fixed) CHECK(all_messages(reports).empty());
  CHECK(out.host()[1] == 7 + 8 + 9 + 10 + 11 + 12 + 13);
}

// `run(shift)` launches a kernel whose threads write the element `shift` after their own in shared memory: one
// element past the end (shift 1, the last thread) and one before the start (shift -1, thread 0) are each one
// memcheck report, under every schedule, located as `past` and `before` say.
template <class Run>
void expect_overflows_reported(Run run, const std::string& kernel, unsigned last_thread, const std::string& past,
                               const std::string& before) {
  for (const int shift : {1, -1}) {
    const auto bad = under_every_schedule([&] { CHECK_THROWS_AS(run(shift), cudasim::check::CheckError); });
    for (const auto& reports : bad) {
      INFO("shift " << shift << ": " << all_messages(reports));
      REQUIRE(reports.size() == 1);
      CHECK(reports[0].checker == "memcheck");
      CHECK(reports[0].kind == "out of bounds");
      CHECK(reports[0].kernel == kernel);
      CHECK(same(reports[0].thread, shift > 0 ? last_thread : 0));
      CHECK(contains(reports[0].location, shift > 0 ? past : before));
    }
  }
  const auto fixed = under_every_schedule([&] { run(0); });
  for (const auto& reports : fixed) CHECK(all_messages(reports).empty());
}

TEST_CASE("memcheck: writes past the end and before the start of dynamic shared memory", "[cudasim][check][ch09]") {
  DeviceArray<float> out(8);
  expect_overflows_reported(
      [&](int shift) { launch(shift_into_tile, dim3(1), dim3(8), 8 * sizeof(float), out.data, shift); },
      "shift_into_tile", 7, "0 bytes past the end of dynamic shared memory (32 bytes)",
      "4 bytes before dynamic shared memory (32 bytes)");
  CHECK(out.host() == std::vector<float>(8, 1.f));
}

TEST_CASE("memcheck: dynamic shared memory is bounded far from it too: 1 MiB past its end and before its start",
          "[cudasim][check][ch09]") {
  DeviceArray<float> out(8);
  for (const int shift : {1 << 18, -(1 << 18)}) {  // in floats
    const auto bad = under_every_schedule([&] {
      CHECK_THROWS_AS(launch(shift_into_tile, dim3(1), dim3(8), 8 * sizeof(float), out.data, shift),
                      cudasim::check::CheckError);
    });
    for (const auto& reports : bad) {
      INFO("shift " << shift << ": " << all_messages(reports));
      REQUIRE(reports.size() == 1);  // every thread's write, one report with repeats
      CHECK(reports[0].kind == "out of bounds");
      CHECK(contains(reports[0].location, shift > 0 ? "bytes past the end of dynamic shared memory (32 bytes)"
                                                    : "bytes before dynamic shared memory (32 bytes)"));
    }
  }
}

TEST_CASE("memcheck: writes past the end and before the start of a static __shared__ array", "[cudasim][check][ch09]") {
  DeviceArray<float> out(16);
  expect_overflows_reported([&](int shift) { launch(shift_into_static_tile, dim3(1), dim3(16), 0, out.data, shift); },
                            "shift_into_static_tile", 15, "0 bytes past the end of shared first (64 bytes)",
                            "4 bytes before shared first (64 bytes)");
  CHECK(out.host() == std::vector<float>(16, 3.f));
}

TEST_CASE("memcheck: a 16-byte vector load from an address that is not a multiple of 16", "[cudasim][check][ch09]") {
  DeviceArray<float> in(iota(4 * 8 + 4)), out(8);
  const auto reports = recorded([&] {
    CHECK_THROWS_AS(launch(load_vectors, dim3(1), dim3(8), 0, in.data, out.data, 1), cudasim::check::CheckError);
  });
  INFO(all_messages(reports));
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].checker == "memcheck");
  CHECK(reports[0].kind == "misaligned");
  CHECK(reports[0].kernel == "load_vectors");
  CHECK(contains(reports[0].location, "(144 bytes) + byte 4"));
  CHECK(contains(reports[0].message, "reads 16 bytes"));
  const auto fixed = under_every_schedule([&] { launch(load_vectors, dim3(1), dim3(8), 0, in.data, out.data, 0); });
  for (const auto& reports_fixed : fixed) CHECK(all_messages(reports_fixed).empty());
  CHECK(out.host()[1] == 4 + 5 + 6 + 7);
}

TEST_CASE("memcheck: a vector load that starts inside an allocation and runs past its end", "[cudasim][check][ch09]") {
  DeviceArray<float> in(iota(4 * 8 + 2)), out(9);  // 136 bytes: thread 8's 16 bytes at byte 128 end 8 bytes past it
  const auto reports = recorded([&] {
    CHECK_THROWS_AS(launch(load_vectors, dim3(1), dim3(9), 0, in.data, out.data, 0), cudasim::check::CheckError);
  });
  INFO(all_messages(reports));
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == "out of bounds");
  CHECK(same(reports[0].thread, 8));
  CHECK(contains(reports[0].message, "reads 16 bytes"));
  CHECK(contains(reports[0].location, "(136 bytes) + element 8"));
}

TEST_CASE("memcheck: a kernel reading memory freed before it ran", "[cudasim][check][ch09]") {
  auto* freed = static_cast<float*>(cudasim::device_allocate(64 * sizeof(float)));
  const std::vector<float> values = iota(64);
  cudasim::copy_to_device(freed, values.data(), values.size() * sizeof(float));
  cudasim::device_free(freed);
  DeviceArray<float> out(64);
  const auto reports = recorded([&] {
    CHECK_THROWS_AS(
        launch(reverse_tile, dim3(1), dim3(kTileThreads), 0, static_cast<const float*>(freed), out.data, true),
        cudasim::check::CheckError);
  });
  INFO(all_messages(reports));
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].kind == "use after free");
  CHECK(contains(reports[0].location, "(256 bytes, freed) + byte 0"));
}

TEST_CASE("initcheck: a shared halo element no thread wrote", "[cudasim][check][ch09]") {
  DeviceArray<float> in(iota(34)), out(32);
  const auto bad =
      under_every_schedule([&] { launch(three_point_sum, dim3(1), dim3(32), 0, in.data, out.data, false); });
  for (const auto& reports : bad) {
    INFO(all_messages(reports));
    REQUIRE(reports.size() == 1);
    CHECK(reports[0].checker == "initcheck");
    CHECK(reports[0].kind == "uninitialised read");
    CHECK(reports[0].kernel == "three_point_sum");
    CHECK(same(reports[0].thread, 31));  // the last thread reads tile[33]
    CHECK(reports[0].location == "shared tile + element 33");
    CHECK(contains(reports[0].message, ", test_checks.cpp:" + std::to_string(kThreePointReadLine) + ")"));
  }
  const auto fixed =
      under_every_schedule([&] { launch(three_point_sum, dim3(1), dim3(32), 0, in.data, out.data, true); });
  for (const auto& reports : fixed) CHECK(all_messages(reports).empty());
  CHECK(out.host()[31] == 31 + 32 + 33);
}

TEST_CASE("initcheck: device memory nothing wrote since it was allocated", "[cudasim][check][ch09]") {
  DeviceArray<float> never_written(kTileThreads), out(kTileThreads);
  const auto bad = under_every_schedule(
      [&] { launch(reverse_tile, dim3(1), dim3(kTileThreads), 0, never_written.data, out.data, true); });
  for (const auto& reports : bad) {
    INFO(all_messages(reports));
    REQUIRE(reports.size() == 1);
    CHECK(reports[0].kind == "uninitialised read");
    CHECK(contains(reports[0].message, "nothing wrote since it was allocated"));
    CHECK(contains(reports[0].location, "(256 bytes) + element "));
  }
}

TEST_CASE("synccheck: a __syncthreads inside if (threadIdx.x < 16)", "[cudasim][check][ch09]") {
  DeviceArray<float> in(iota(32)), out(32);
  const auto bad =
      under_every_schedule([&] { launch(half_block_barrier, dim3(1), dim3(32), 0, in.data, out.data, false); });
  for (const auto& reports : bad) {
    INFO(all_messages(reports));
    const Report* r = find(reports, "synccheck");
    REQUIRE(r != nullptr);
    CHECK(r->kind == "divergent barrier");
    CHECK(r->kernel == "half_block_barrier");
    CHECK(r->thread.x < 16);
    CHECK(r->other_thread.x >= 16);
    CHECK(contains(r->message, "exited without reaching it"));
    CHECK(contains(r->location, "test_checks.cpp:"));
  }
  const auto fixed =
      under_every_schedule([&] { launch(half_block_barrier, dim3(1), dim3(32), 0, in.data, out.data, true); });
  for (const auto& reports : fixed) CHECK(all_messages(reports).empty());
  CHECK(out.host()[0] == 15.f);
}

TEST_CASE("synccheck: one warp's shuffle at two call sites", "[cudasim][check][ch09]") {
  DeviceArray<float> in(iota(32)), out(32);
  const auto bad = under_every_schedule([&] { launch(split_shuffle, dim3(1), dim3(32), 0, in.data, out.data, false); });
  for (const auto& reports : bad) {
    INFO(all_messages(reports));
    REQUIRE(reports.size() == 1);
    CHECK(reports[0].checker == "synccheck");
    CHECK(reports[0].kind == "divergent warp collective");
    CHECK((reports[0].thread.x < 16) != (reports[0].other_thread.x < 16));
  }
  const auto fixed =
      under_every_schedule([&] { launch(split_shuffle, dim3(1), dim3(32), 0, in.data, out.data, true); });
  for (const auto& reports : fixed) CHECK(all_messages(reports).empty());
}

TEST_CASE("synccheck: a shuffle that reads a lane outside its mask", "[cudasim][check][ch09]") {
  DeviceArray<float> in(iota(32)), out(32);
  const auto bad =
      under_every_schedule([&] { launch(shuffle_outside_mask, dim3(1), dim3(32), 0, in.data, out.data, 16); });
  for (const auto& reports : bad) {
    INFO(all_messages(reports));
    REQUIRE(reports.size() == 1);  // every lane of the 16 reads outside: one report with repeats
    CHECK(reports[0].checker == "synccheck");
    CHECK(reports[0].kind == "shuffle from a lane outside the mask");
    CHECK(reports[0].location == "test_checks.cpp:" + std::to_string(kOutsideMaskLine));
    CHECK(contains(reports[0].message, "lane 0 reads lane 16"));
    CHECK(contains(reports[0].message, "whose mask 0x0000ffff leaves lane 16 out"));
  }
  const auto fixed =  // each lane reads its own value: inside the mask
      under_every_schedule([&] { launch(shuffle_outside_mask, dim3(1), dim3(32), 0, in.data, out.data, 0); });
  for (const auto& reports : fixed) CHECK(all_messages(reports).empty());
}

TEST_CASE("checks: a report fails the launch with CheckError unless recording", "[cudasim][check][ch09]") {
  DeviceArray<float> in(iota(kTileThreads)), out(kTileThreads);
  cudasim::check::enable(cudasim::check::race);
  CHECK_THROWS_AS(launch(reverse_tile, dim3(1), dim3(kTileThreads), 0, in.data, out.data, false),
                  cudasim::check::CheckError);
  CHECK_NOTHROW(launch(reverse_tile, dim3(1), dim3(kTileThreads), 0, in.data, out.data, true));
  cudasim::check::enable(cudasim::check::none);
  cudasim::check::take_reports();
  // Checks off: the same racy kernel runs without a word.
  CHECK_NOTHROW(launch(reverse_tile, dim3(1), dim3(kTileThreads), 0, in.data, out.data, false));
  CHECK(cudasim::check::take_reports().empty());
}
