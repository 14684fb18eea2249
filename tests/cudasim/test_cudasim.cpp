// cuda-sim's own tests: coordinates, barriers and shared memory, warp collectives with PTX's lane rules,
// atomics, start order, and the failures it must stop with (run in a child process: they abort).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <cmath>
#include <csignal>
#include <cstring>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "autograd/bfloat16.h"
#include "cudasim/check.h"
#include "cudasim/cudasim.h"
#include "cudasim/profile.h"

using cudasim::dim3;
using cudasim::launch;

namespace {

// Runs f in a forked child; returns whether it died of a signal (abort) and what it wrote to stderr.
struct ChildResult {
  bool aborted = false;
  int signal = 0;  // the one it died of
  std::string stderr_text;
};
template <class F>
ChildResult run_in_child(F f) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    for (const int sig : {SIGABRT, SIGSEGV}) signal(sig, SIG_DFL);  // not Catch2's handlers: just die
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    f();
    _exit(0);
  }
  close(fds[1]);
  ChildResult r;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) r.stderr_text.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.aborted = WIFSIGNALED(status);
  r.signal = r.aborted ? WTERMSIG(status) : 0;
  return r;
}

// Every schedule: a kernel test passes only if it passes with threads started first-to-last, last-to-first
// and in two random orders.
template <class F>
void in_every_schedule(F f) {
  const std::pair<cudasim::Schedule, int> schedules[] = {{cudasim::Schedule::forward, 0},
                                                         {cudasim::Schedule::reverse, 0},
                                                         {cudasim::Schedule::random, 1},
                                                         {cudasim::Schedule::random, 2}};
  for (const auto& [order, seed] : schedules) {
    INFO("schedule " << static_cast<int>(order) << " seed " << seed);
    cudasim::set_schedule(order, static_cast<std::uint64_t>(seed));
    f();
  }
  cudasim::set_schedule(cudasim::Schedule::forward);
}

__global__ void write_coordinates(int* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  out[block * (blockDim.x * blockDim.y * blockDim.z) + thread] = static_cast<int>(block * 1000 + thread);
}

// Reverses 256 values through shared memory: correct only with the barrier between write and read.
__global__ void reverse_through_shared(const float* in, float* out, bool with_barrier) {
  __shared__ float tile[256];
  const unsigned t = threadIdx.x;
  tile[t] = in[blockIdx.x * 256 + t];
  if (with_barrier) __syncthreads();
  out[blockIdx.x * 256 + t] = tile[255 - t];
}

// Sum of a block's values: each warp reduces with __shfl_down_sync, lane 0 of each warp adds into out.
__global__ void warp_sum(const float* in, float* out) {
  float v = in[threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) atomicAdd(out, v);
}

}  // namespace

TEST_CASE("cuda-sim: every thread of the grid runs once with its coordinates", "[cudasim][ch09]") {
  in_every_schedule([] {
    const dim3 grid(3, 2, 2), block(4, 2, 2);
    std::vector<int> out(12 * 16, -1);
    launch(write_coordinates, grid, block, 0, out.data());
    std::set<int> seen(out.begin(), out.end());
    CHECK(seen.size() == out.size());
    CHECK(out[0] == 0);
    CHECK(out[16 * 5 + 7] == 5 * 1000 + 7);
    CHECK(out.back() == 11 * 1000 + 15);
  });
}

TEST_CASE("cuda-sim: __syncthreads orders shared memory; without it one start order fails", "[cudasim][ch09]") {
  std::vector<float> in(512);
  std::iota(in.begin(), in.end(), 0.f);
  in_every_schedule([&] {
    std::vector<float> out(512);
    launch(reverse_through_shared, dim3(2), dim3(256), 0, in.data(), out.data(), true);
    for (int i = 0; i < 512; ++i)
      CHECK(out[static_cast<std::size_t>(i)] == in[static_cast<std::size_t>(i / 256 * 256 + 255 - i % 256)]);
  });
  // Without the barrier, threads started first read slots not yet written (stale from the last launch or
  // zero) in at least one of the two orders: the reverse-order run exists to catch exactly this.
  int wrong = 0;
  for (const auto order : {cudasim::Schedule::forward, cudasim::Schedule::reverse}) {
    cudasim::set_schedule(order);
    std::vector<float> fresh(512);
    std::iota(fresh.begin(), fresh.end(), 1000.f);
    std::vector<float> out(512);
    launch(reverse_through_shared, dim3(2), dim3(256), 0, fresh.data(), out.data(), false);
    for (int i = 0; i < 512; ++i)
      wrong += out[static_cast<std::size_t>(i)] != fresh[static_cast<std::size_t>(i / 256 * 256 + 255 - i % 256)];
  }
  cudasim::set_schedule(cudasim::Schedule::forward);
  CHECK(wrong > 0);
}

TEST_CASE("cuda-sim: warp shuffles follow the PTX lane rules", "[cudasim][ch09]") {
  in_every_schedule([] {
    std::vector<float> in(64);
    std::iota(in.begin(), in.end(), 0.f);
    float total = 0;
    launch(warp_sum, dim3(1), dim3(64), 0, in.data(), &total);
    CHECK(total == 63.f * 64.f / 2);

    std::vector<int> got(32 * 6);
    launch(
        [](int* out) {
          const int lane = static_cast<int>(threadIdx.x);
          out[lane] = __shfl_sync(0xffffffffu, lane * 10, 3);          // broadcast lane 3
          out[32 + lane] = __shfl_up_sync(0xffffffffu, lane, 2);       // lanes 0, 1 keep their own
          out[160 + lane] = __shfl_up_sync(0xffffffffu, lane, 3, 8);   // within segments of 8
          out[64 + lane] = __shfl_down_sync(0xffffffffu, lane, 4, 8);  // within segments of 8
          out[96 + lane] = __shfl_xor_sync(0xffffffffu, lane, 1);      // butterfly: swap neighbours
          out[128 + lane] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 2));
        },
        dim3(1), dim3(32), 0, got.data());
    for (int lane = 0; lane < 32; ++lane) {
      CHECK(got[lane] == 30);
      CHECK(got[32 + lane] == (lane < 2 ? lane : lane - 2));
      CHECK(got[64 + lane] == (lane % 8 < 4 ? lane + 4 : lane));
      CHECK(got[160 + lane] == (lane % 8 >= 3 ? lane - 3 : lane));
      CHECK(got[96 + lane] == (lane ^ 1));
      CHECK(static_cast<unsigned>(got[128 + lane]) == 0xAAAAAAAAu);
    }
  });
}

// The tensor cores' mma.sync m16n8k16 (bfloat16 in, float32 sums), with the fragments laid out as the PTX ISA
// says, written out here once more: lane 4g + t holds A's rows g and g + 8 at columns 2t, 2t + 1 and 8 higher,
// B's column g at rows 2t, 2t + 1 and 8 higher, and D's rows g and g + 8 at columns 2t, 2t + 1. Small integers
// are exact in bfloat16 and in the float32 sums, so D must equal C + A B exactly.
TEST_CASE("cuda-sim: mma.sync multiplies a warp's fragments as the PTX ISA lays them out; a partial warp stops",
          "[cudasim][ch09]") {
  float a[16][16], b[16][8], c[16][8];
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 16; ++k) a[i][k] = static_cast<float>((i * 3 + k * 5) % 7 - 3);
  for (int k = 0; k < 16; ++k)
    for (int j = 0; j < 8; ++j) b[k][j] = static_cast<float>((k * 2 + j * 7) % 5 - 2);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) c[i][j] = static_cast<float>(i - j);
  struct Operands {
    const float (*a)[16];
    const float (*b)[8];
    const float (*c)[8];
    float (*d)[8];
  };
  float d[16][8];
  auto kernel = [](Operands o) {
    const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
    auto pair = [](float lo, float hi) {
      return stepformer::float_bits(lo) >> 16 | (stepformer::float_bits(hi) & 0xFFFF0000u);
    };
    const std::uint32_t fa[4] = {pair(o.a[g][2 * t], o.a[g][2 * t + 1]), pair(o.a[g + 8][2 * t], o.a[g + 8][2 * t + 1]),
                                 pair(o.a[g][2 * t + 8], o.a[g][2 * t + 9]),
                                 pair(o.a[g + 8][2 * t + 8], o.a[g + 8][2 * t + 9])};
    const std::uint32_t fb[2] = {pair(o.b[2 * t][g], o.b[2 * t + 1][g]), pair(o.b[2 * t + 8][g], o.b[2 * t + 9][g])};
    float fd[4] = {o.c[g][2 * t], o.c[g][2 * t + 1], o.c[g + 8][2 * t], o.c[g + 8][2 * t + 1]};
    cudasim::mma_m16n8k16_bf16(fd, fa, fb, {__FILE__, __LINE__});
    o.d[g][2 * t] = fd[0], o.d[g][2 * t + 1] = fd[1], o.d[g + 8][2 * t] = fd[2], o.d[g + 8][2 * t + 1] = fd[3];
  };
  in_every_schedule([&] {
    launch(kernel, dim3(1), dim3(32), 0, Operands{a, b, c, d});
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 8; ++j) {
        float want = c[i][j];
        for (int k = 0; k < 16; ++k) want += a[i][k] * b[k][j];
        INFO("d[" << i << "][" << j << "]");
        CHECK(d[i][j] == want);
      }
  });
  std::string partial;
  try {
    launch(kernel, dim3(1), dim3(16), 0, Operands{a, b, c, d});
  } catch (const cudasim::check::CheckError& e) {
    partial = e.what();
  }
  CHECK(partial.find("warp collective misused in kernel (a lambda), block (0, 0, 0), warp 0: mma.sync") !=
        std::string::npos);
  CHECK(partial.find("the warp has 16 lanes; the instruction needs all 32") != std::string::npos);
}

// ldmatrix.x4 as the PTX ISA lays it out, written out here once more: lane 8q + r gives row r of 8 x 8 matrix q;
// lane 4r + w receives, in d[q], values (r, 2w) and (r, 2w + 1) of matrix q (the first in the low half), or with
// .trans values (2w, r) and (2w + 1, r). Every value is distinct, so any other hand-out shows.
TEST_CASE(
    "cuda-sim: ldmatrix hands out the rows the lanes gave as the PTX ISA lays them out, with and without .trans; a "
    "partial warp stops",
    "[cudasim][ch09]") {
  std::uint16_t m[4][8][8];
  for (int q = 0; q < 4; ++q)
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) m[q][r][c] = static_cast<std::uint16_t>(64 * q + 8 * r + c);
  for (const bool trans : {false, true}) {
    std::uint32_t got[32][4];
    auto kernel = [](const std::uint16_t(*mats)[8][8], std::uint32_t(*out)[4], bool tr) {
      const int lane = static_cast<int>(threadIdx.x) % 32;
      std::uint32_t row[4], d[4];
      std::memcpy(row, mats[lane / 8][lane % 8], sizeof row);
      cudasim::ldmatrix_x4(d, row, tr, {__FILE__, __LINE__});
      std::memcpy(out[lane], d, sizeof d);
    };
    in_every_schedule([&] {
      launch(kernel, dim3(1), dim3(32), 0, m, got, trans);
      for (int lane = 0; lane < 32; ++lane)
        for (int q = 0; q < 4; ++q) {
          const int r = lane / 4, w = lane % 4;
          const std::uint32_t low = trans ? m[q][2 * w][r] : m[q][r][2 * w];
          const std::uint32_t high = trans ? m[q][2 * w + 1][r] : m[q][r][2 * w + 1];
          INFO((trans ? "ldmatrix.trans" : "ldmatrix") << ", lane " << lane << ", matrix " << q);
          CHECK(got[lane][q] == (low | high << 16));
        }
    });
    std::string partial;
    try {
      launch(kernel, dim3(1), dim3(16), 0, m, got, trans);
    } catch (const cudasim::check::CheckError& e) {
      partial = e.what();
    }
    CHECK(partial.find(trans ? "warp 0: ldmatrix.x4.trans" : "warp 0: ldmatrix.x4 (") != std::string::npos);
    CHECK(partial.find("the warp has 16 lanes; the instruction needs all 32") != std::string::npos);
  }
}

// cp.async's groups: wait<N> lands all but the N newest; until then the destination reads as NaN (the bytes are
// undefined there on a GPU), and a copy without `fill` lands zeros.
TEST_CASE("cuda-sim: cp.async lands a group at the wait that leaves it out; before, its bytes are NaN",
          "[cudasim][ch09]") {
  alignas(16) float src[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  float seen[4][12];
  launch(
      [](const float* from, float(*out)[12]) {
        alignas(16) float dst[12] = {};
        cudasim::AsyncCopies<4> copies;
        copies.copy16(dst, from, true);
        copies.commit();
        copies.copy16(dst + 4, from + 4, true);
        copies.copy16(dst + 8, from + 8, false);
        copies.commit();
        std::memcpy(out[0], dst, sizeof dst);  // nothing landed
        copies.wait<1>();
        std::memcpy(out[1], dst, sizeof dst);  // the first group
        copies.wait<1>();
        std::memcpy(out[2], dst, sizeof dst);  // still one group in flight
        copies.wait<0>();
        std::memcpy(out[3], dst, sizeof dst);
      },
      dim3(1), dim3(1), 0, src, seen);
  for (int i = 0; i < 12; ++i) {
    INFO("value " << i);
    CHECK(std::isnan(seen[0][i]));
    CHECK((i < 4 ? seen[1][i] == src[i] : std::isnan(seen[1][i])));
    CHECK((i < 4 ? seen[2][i] == src[i] : std::isnan(seen[2][i])));
    CHECK(seen[3][i] == (i < 8 ? src[i] : 0.f));
  }
  std::string overflow;
  try {
    launch(
        [](const float* from) {
          alignas(16) float dst[12];
          cudasim::AsyncCopies<2> copies;
          for (int i = 0; i < 3; ++i) copies.copy16(dst + 4 * i, from + 4 * i, true);
        },
        dim3(1), dim3(1), 0, src);
  } catch (const std::length_error& e) {
    overflow = e.what();
  }
  CHECK(overflow.find("more than 2 cp.async copies in flight") != std::string::npos);
}

TEST_CASE("cuda-sim: a shuffle reading an absent lane of a partial warp gets poison (NaN)", "[cudasim][ch09]") {
  std::vector<float> got(40);
  launch(
      [](float* out) {
        const float v = static_cast<float>(threadIdx.x);
        out[threadIdx.x] = __shfl_down_sync(0xffffffffu, v, 4);  // the last warp has lanes 0-7 only
      },
      dim3(1), dim3(40), 0, got.data());
  CHECK(got[0] == 4.f);
  CHECK(got[35] == 39.f);
  CHECK(std::isnan(got[36]));  // lane 4 of the last warp reads lane 8, which does not exist
}

TEST_CASE("cuda-sim: dynamic shared memory is poisoned at every block start", "[cudasim][ch09]") {
  std::vector<float> got(4);
  launch(
      [](float* out) {
        CUDASIM_DYNAMIC_SHARED(float, scratch);
        if (threadIdx.x == 0) out[blockIdx.x * 2] = scratch[5];  // never written: NaN
        scratch[5] = 1.f;
        __syncthreads();
        if (threadIdx.x == 0) out[blockIdx.x * 2 + 1] = scratch[5];
      },
      dim3(2), dim3(8), 16 * sizeof(float), got.data());
  CHECK(std::isnan(got[0]));
  CHECK(got[1] == 1.f);
  CHECK(std::isnan(got[2]));  // the second block starts poisoned again
}

TEST_CASE("cuda-sim: atomics from many blocks and threads", "[cudasim][ch09]") {
  std::vector<int> histogram(8, 0);
  launch([](int* h) { atomicAdd(&h[(blockIdx.x * blockDim.x + threadIdx.x) % 8], 1); }, dim3(5), dim3(96), 0,
         histogram.data());
  for (int c : histogram) CHECK(c == 5 * 96 / 8);
}

// A grid large enough to run on several OS threads (cudasim.h, set_os_threads): each block records which OS
// thread ran it, each CUDA thread computes a value of its own (a little work, so that every OS thread gets
// blocks) and adds into one count and one float total, 16 times each.
__global__ void spread_blocks(float* out, std::thread::id* ran_on, int* count, float* total) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x == 0) ran_on[blockIdx.x] = std::this_thread::get_id();
  float v = static_cast<float>(i);
  for (int k = 0; k < 500; ++k) v = v * 0.999f + std::sin(static_cast<float>(k + i));
  out[i] = v;
  for (int k = 0; k < 16; ++k) atomicAdd(count, 1), atomicAdd(total, 1.f);
}

TEST_CASE("cuda-sim: a large grid's blocks run on several OS threads, bit for bit as on one, atomics atomic",
          "[cudasim][ch09]") {
  constexpr unsigned kBlocks = 128, kThreads = 256, kAll = kBlocks * kThreads;
  struct Run {
    std::vector<float> out = std::vector<float>(kAll);
    std::vector<std::thread::id> ran_on = std::vector<std::thread::id>(kBlocks);
    int count = 0;
    float total = 0;
  };
  const auto run_on = [&](unsigned os_threads) {
    Run r;
    cudasim::set_os_threads(os_threads);
    launch(spread_blocks, dim3(kBlocks), dim3(kThreads), 0, r.out.data(), r.ran_on.data(), &r.count, &r.total);
    cudasim::set_os_threads(0);
    return r;
  };
  const Run one = run_on(1), four = run_on(4);
  CHECK(std::set<std::thread::id>(one.ran_on.begin(), one.ran_on.end()).size() == 1);
  const std::size_t os_threads_used = std::set<std::thread::id>(four.ran_on.begin(), four.ran_on.end()).size();
  if (cudasim::check::instrumented())
    CHECK(os_threads_used == 1);  // the checking build watches one static section of __shared__: one OS thread
  else
    CHECK(os_threads_used > 1);
  CHECK(std::memcmp(one.out.data(), four.out.data(), kAll * sizeof(float)) == 0);
  CHECK(one.count == 16 * kAll);
  CHECK(four.count == 16 * kAll);    // a plain read-modify-write loses additions between OS threads
  CHECK(four.total == 16.f * kAll);  // integers below 2^24: exact in float whatever the order
}

TEST_CASE("cuda-sim: exited threads count as arrived at a barrier", "[cudasim][ch09]") {
  int reached = 0;
  launch(
      [](int* r) {
        if (threadIdx.x >= 16) return;  // half the block leaves before the barrier
        __syncthreads();
        atomicAdd(r, 1);
      },
      dim3(1), dim3(32), 0, &reached);
  CHECK(reached == 16);
}

TEST_CASE("cuda-sim: an exception thrown by one thread ends the launch and reaches the host", "[cudasim][ch09]") {
  // Thread 5 of block 1 throws while the rest of its block waits at a barrier and its warp at a shuffle: the
  // launch ends there (as a trap ends a grid on a GPU), the host gets the exception, later blocks never run,
  // and the next launch starts clean.
  std::vector<int> ran(4, 0);
  const auto body = [](int* r) {
    atomicAdd(&r[blockIdx.x], 1);
    if (blockIdx.x == 1 && threadIdx.x == 5) throw std::runtime_error("thread 5 of block 1");
    __shfl_sync(0xffffffffu, 1.0f, 0);
    __syncthreads();
  };
  std::string thrown;
  try {
    launch(body, dim3(4), dim3(64), 0, ran.data());
  } catch (const std::runtime_error& e) {
    thrown = e.what();
  }
  CHECK(thrown == "thread 5 of block 1");
  CHECK(ran[0] == 64);
  CHECK(ran[2] == 0);
  CHECK(ran[3] == 0);
  std::fill(ran.begin(), ran.end(), 0);
  launch([](int* r) { atomicAdd(&r[blockIdx.x], 1); }, dim3(4), dim3(64), 0, ran.data());
  CHECK(ran == std::vector<int>(4, 64));
}

TEST_CASE("cuda-sim stops with a clear message on deadlock, bad masks and oversized blocks", "[cudasim][ch09]") {
  const auto deadlock = run_in_child([] {
    launch(
        [] {
          // Threads 32-47 (lanes 0-15 of warp 1) wait at the block barrier for threads 48-63, which wait at
          // a full-warp __syncwarp for lanes 0-15: neither can go on.
          if (threadIdx.x < 48)
            __syncthreads();
          else
            __syncwarp();
        },
        dim3(1), dim3(64), 0);
  });
  CHECK(deadlock.aborted);
  CHECK(deadlock.stderr_text.find("cuda-sim: deadlock in block (0, 0, 0)") != std::string::npos);

  const auto too_big = run_in_child([] { launch([] {}, dim3(1), dim3(64, 32), 0); });
  CHECK(too_big.aborted);
  CHECK(too_big.stderr_text.find("block size 2048 > 1024") != std::string::npos);
}

// A warp collective used against its rules, as a kernel named in the symbol table (a lambda's name is not).
constexpr unsigned kMisuseLine = __LINE__ + 4;  // the collectives' line below
__global__ void misuse_collective(int* out, int how) {
  const unsigned lane = threadIdx.x % 32;
  // clang-format off
  if (how == 0) out[lane] = __shfl_sync(0x0000ffffu, 1, 0); else if (how == 1 && lane < 16) out[lane] = __shfl_sync(0xffffffffu, 1, 0); else if (how == 2) out[lane] = lane < 16 ? __shfl_sync(0xffffffffu, 1, 0) : static_cast<int>(__ballot_sync(0xffffffffu, 1)); else if (how == 3 && lane < 16) __syncwarp();
  // clang-format on
}

TEST_CASE(
    "cuda-sim: a warp collective misused is a CheckError naming the kernel, the call and its line, on every "
    "schedule in the same words",
    "[cudasim][ch09]") {
  const std::string at = "test_cudasim.cpp:" + std::to_string(kMisuseLine);
  const std::string head = "cuda-sim: warp collective misused in kernel misuse_collective, block (0, 0, 0), warp 0: ";
  const std::pair<int, std::string> cases[] = {
      {0, "__shfl_sync (mask 0x0000ffff) at " + at + ": the mask leaves out a lane that calls it"},
      {1, "__shfl_sync (mask 0xffffffff) at " + at + ": a lane named in its mask exited without calling it"},
      {2, "__ballot_sync (mask 0xffffffff) at " + at + " and __shfl_sync (mask 0xffffffff) at " + at +
              ": lanes of one warp meet at different collectives"},
      {3, "__syncwarp (mask 0xffffffff) at " + at + ": a lane named in its mask exited without calling it"}};
  int* out = static_cast<int*>(cudasim::device_allocate(32 * sizeof(int)));
  for (const auto& [how, want] : cases)
    for (const auto& [order, seed] : {std::pair{cudasim::Schedule::forward, 0},
                                      {cudasim::Schedule::reverse, 0},
                                      {cudasim::Schedule::random, 1},
                                      {cudasim::Schedule::random, 2}}) {
      cudasim::set_schedule(order, static_cast<std::uint64_t>(seed));
      std::string message;
      try {
        launch(misuse_collective, dim3(1), dim3(32), 0, out, how);
      } catch (const cudasim::check::CheckError& e) {
        message = e.what();
      }
      INFO("case " << how << ", schedule " << static_cast<int>(order) << " seed " << seed << ": " << message);
      CHECK(message.rfind(head + want, 0) == 0);
    }
  cudasim::set_schedule(cudasim::Schedule::forward);
  // The next launch starts clean.
  launch(misuse_collective, dim3(1), dim3(32), 0, out, 4);
  cudasim::device_free(out);
}

TEST_CASE("cuda-sim: a write past the end of dynamic shared memory stops at its guard page, never in the heap",
          "[cudasim][ch09]") {
  const auto kernel = [](float* out) {
    CUDASIM_DYNAMIC_SHARED(float, tile);
    tile[threadIdx.x + 1] = 1.f;  // thread 7 writes element 8
    __syncthreads();
    out[threadIdx.x] = tile[threadIdx.x];
  };
  std::vector<float> out(8);
  // 8 floats: element 8 is the guard page's first. (Held in a std::vector, the buffer let the write land in the
  // host's heap: nothing reported, or a malloc abort long after.)
  const auto overflow = run_in_child([&] { launch(kernel, dim3(2), dim3(8), 8 * sizeof(float), out.data()); });
  CHECK(overflow.signal == SIGSEGV);
  launch(kernel, dim3(2), dim3(8), 9 * sizeof(float), out.data());  // one element more: in bounds
  CHECK(std::isnan(out[0]));                                        // never written: the poison
  CHECK(out[1] == 1.f);
}

#if !defined(CUDASIM_CHECK)
TEST_CASE("cuda-sim: the plain build refuses checks instead of checking nothing", "[cudasim][ch09]") {
  // The kernels of this build are not instrumented: a check switched on would see no access and report nothing.
  CHECK_FALSE(cudasim::check::instrumented());
  CHECK_THROWS_AS(cudasim::check::enable(cudasim::check::race), std::logic_error);
  CHECK(cudasim::check::enabled() == cudasim::check::none);
  CHECK_THROWS_AS(cudasim::profile::enable(true), std::logic_error);
  CHECK_FALSE(cudasim::profile::enabled());
  const auto from_environment = run_in_child([] {
    setenv("STEPFORMER_CUDASIM_CHECK", "all", 1);
    execl("/proc/self/exe", "cudasim_tests", "cuda-sim: every thread of the grid runs once with its coordinates",
          static_cast<char*>(nullptr));
  });
  CHECK(from_environment.aborted);
  CHECK(from_environment.stderr_text.find("build with the cudasim-check preset") != std::string::npos);
}
#endif
