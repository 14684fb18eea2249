#pragma once
// cuda-sim's inner state, shared by the scheduler (cudasim.cpp) and the checker (check.cpp): the running
// launch, its block and threads. Not part of the public header: kernels see only cudasim.h.
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <vector>

#include "cudasim/cudasim.h"
#include "fiber.h"

namespace cudasim::detail {

enum class State { not_started, ready, at_barrier, at_warp, done };

struct Thread {
  uint3 idx;
  int linear = 0;
  State state = State::not_started;
  Context context = nullptr;  // where it is suspended (at a barrier or a warp collective)
  void* stack = nullptr;      // the top of the fiber stack it runs on, while it has one (stack_pool.h)
  std::uint64_t result = 0;   // of the last warp collective (the warp's slot is reused at once)
  Site site;                  // where it waits: the call site of its __syncthreads or warp collective
};

// One warp collective in progress: the lanes that arrived, their values, and when all have, the results.
enum class Collective { shuffle, ballot, syncwarp, mma, ldmatrix, ldmatrix_trans };

struct WarpOp {
  bool active = false;
  Collective kind = Collective::shuffle;
  Site site;  // where the lane that opened it called it
  Shuffle mode = Shuffle::idx;
  unsigned mask = 0, arrived = 0;
  int width = 32;
  std::uint64_t values[32] = {};
  int sources[32] = {};
};

// A launch's dynamic shared memory, between two inaccessible guards of kGuard bytes (address space only), and
// ending (to within 16 bytes, its alignment) at the second: a kernel reaching up to kGuard past either end stops
// with SIGSEGV in the plain build (before its start, the pages the data does not fill come first: those
// accesses land there, in this mapping), and in the checking build memcheck reports the access before it
// happens. Neither lets it corrupt the host's memory, which a std::vector there did (an index off by a row
// lands kilobytes away). One mapping per OS thread, grown as launches ask for more, reused by the next launch.
class DynamicShared {
 public:
  static constexpr std::size_t kGuard = std::size_t{1} << 30;  // 1 GiB: far past any shared memory index
  DynamicShared() = default;
  DynamicShared(const DynamicShared&) = delete;
  DynamicShared& operator=(const DynamicShared&) = delete;
  ~DynamicShared();
  void assign(std::size_t bytes, unsigned char value);  // `bytes` of `value`, ending at the guard
  unsigned char* data() const { return data_; }
  std::size_t size() const { return bytes_; }
  // True for an address in the mapping (its guards included) but outside [data(), data() + size()).
  bool beside(std::uintptr_t a) const {
    return a - reinterpret_cast<std::uintptr_t>(base_) < mapped_ &&
           a - reinterpret_cast<std::uintptr_t>(data_) >= bytes_;
  }

 private:
  unsigned char* base_ = nullptr;
  std::size_t mapped_ = 0;  // the guards included
  unsigned char* data_ = nullptr;
  std::size_t bytes_ = 0;
};
DynamicShared& dynamic_shared_memory();  // this OS thread's

struct Block {
  std::vector<Thread> threads;
  std::deque<int> ready;
  int current = -1, exited = 0, at_barrier = 0;
  std::uint32_t barriers = 0;             // __syncthreads the block has passed: its memory epoch
  std::vector<std::uint32_t> warp_syncs;  // per warp: __syncwarp()s completed (a warp's own epoch)
  std::vector<WarpOp> warps;
  DynamicShared* shared = nullptr;  // the launch's dynamic shared memory
  std::vector<int> waking;          // threads about to be made ready (kept: no allocation per barrier or collective)
  Context scheduler = nullptr;      // run_block's loop, while a fiber runs
};

struct Launch {
  dim3 grid, block;
  uint3 block_idx;
  std::uint32_t block_linear = 0;  // of block_idx in the grid
  std::uint32_t id = 0;            // launches are counted from 1 (the checker's shadow tells them apart)
  const void* kernel = nullptr;
  Block* b = nullptr;
  const std::function<void()>* body = nullptr;
  std::exception_ptr error;  // the first exception a CUDA thread threw: it ends the launch
};

// The launch running on this OS thread (null outside run_grid).
extern thread_local Launch* active;
// Makes thread `id` of `b` the running one (-1: none): what threadIdx reads.
void enter(Block& b, int id);

[[noreturn]] void fail(const std::string& message);
// The CheckError (warp.cpp) for a lane of `op`'s mask that exited without calling it: the launch's error.
std::exception_ptr lane_exited(const Launch& l, int warp, const WarpOp& op);

// The scheduler's moves (cudasim.cpp), for the warp collectives (warp.cpp).
Launch& launch_state(const char* what);            // the running launch; fails outside a kernel, naming `what`
Thread& me();                                      // the running CUDA thread
std::string where(const Launch& l);                // "block (x, y, z)"
void make_ready(Block& b, std::vector<int>& ids);  // onto the ready queue, in the schedule's order
void yield();                                      // suspends the running thread until it is made ready again

}  // namespace cudasim::detail
