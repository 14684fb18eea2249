// cuda-sim's scheduler: fibers for CUDA threads, one block at a time, barriers and warp collectives.
#include "cudasim/cudasim.h"

#include <fmt/format.h>
#include <sanitizer/asan_interface.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xmmintrin.h>

#include <algorithm>
#include <boost/context/stack_context.hpp>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "checker.h"
#include "mma.h"
#include "scheduler.h"

namespace cudasim {

namespace detail {

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "cuda-sim: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

thread_local Launch* active = nullptr;
thread_local constinit Running running;

[[noreturn]] void outside_kernel(const char* what) { fail(fmt::format("{} called outside a kernel", what)); }

void enter(Block& b, int id) {
  b.current = id;
  running.thread_idx = id < 0 ? nullptr : &b.threads[static_cast<std::size_t>(id)].idx;
}

}  // namespace detail

using namespace detail;
namespace ctx = boost::context;

namespace {

// Fiber stacks with a guard page below them (an overflow is a SIGSEGV, not corruption), kept in a pool:
// a block of 1024 threads would otherwise map and unmap 1024 stacks. Size: STEPFORMER_CUDASIM_STACK
// bytes, 64 KiB by default (large local arrays need more).
class StackPool {
 public:
  StackPool() {
    const char* env = std::getenv("STEPFORMER_CUDASIM_STACK");
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    size_ = env ? std::strtoull(env, nullptr, 10) : 64 * 1024;
    size_ = (size_ + page - 1) / page * page;
    page_ = page;
  }
  ~StackPool() {
    for (void* base : free_) munmap(base, size_ + page_);
  }
  ctx::stack_context allocate() {
    void* base = nullptr;
    if (!free_.empty()) {
      base = free_.back();
      free_.pop_back();
    } else {
      base = mmap(nullptr, size_ + page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (base == MAP_FAILED) fail("cannot map a fiber stack");
      mprotect(base, page_, PROT_NONE);  // the guard page, at the low end: stacks grow down
    }
    // Under AddressSanitizer: a thread whose launch ended by an exception leaves its unwound frames' redzones
    // poisoned (ASan cannot clear them on a stack it does not know); the next fiber on this stack must not
    // inherit them. A no-op without ASan.
    ASAN_UNPOISON_MEMORY_REGION(static_cast<char*>(base) + page_, size_);
    ctx::stack_context sc;
    sc.size = size_;
    sc.sp = static_cast<char*>(base) + page_ + size_;
    return sc;
  }
  void deallocate(ctx::stack_context& sc) { free_.push_back(static_cast<char*>(sc.sp) - size_ - page_); }

 private:
  std::size_t size_ = 0, page_ = 0;
  std::vector<void*> free_;
};

// The fiber library takes its stack allocator by value: this one forwards to the pool.
struct PoolAllocator {
  StackPool* pool;
  ctx::stack_context allocate() { return pool->allocate(); }
  void deallocate(ctx::stack_context& sc) { pool->deallocate(sc); }
};

// The schedule: STEPFORMER_CUDASIM_SCHEDULE=forward|reverse|random:SEED, or set_schedule().
struct Scheduling {
  Schedule order = Schedule::forward;
  std::mt19937_64 rng;
  Scheduling() {
    const char* env = std::getenv("STEPFORMER_CUDASIM_SCHEDULE");
    if (env == nullptr || *env == '\0') return;
    const std::string s = env;
    if (s == "forward") return;
    if (s == "reverse") {
      order = Schedule::reverse;
      return;
    }
    char* end = nullptr;
    const std::uint64_t seed = s.rfind("random:", 0) == 0 ? std::strtoull(s.c_str() + 7, &end, 10) : 0;
    if (end == nullptr || end == s.c_str() + 7 || *end != '\0')
      fail("STEPFORMER_CUDASIM_SCHEDULE=" + s + ": expected forward, reverse or random:SEED (SEED a number)");
    order = Schedule::random;
    rng.seed(seed);
  }
};
Scheduling& scheduling() {
  static Scheduling s;
  return s;
}

// Puts `ids` on the ready queue in the schedule's order.
void make_ready(Block& b, std::vector<int>& ids) {
  Scheduling& s = scheduling();
  if (s.order == Schedule::reverse) std::reverse(ids.begin(), ids.end());
  if (s.order == Schedule::random) std::shuffle(ids.begin(), ids.end(), s.rng);
  for (const int id : ids) {
    Thread& t = b.threads[static_cast<std::size_t>(id)];
    if (t.state != State::not_started) t.state = State::ready;  // a thread not yet started starts when its turn comes
    b.ready.push_back(id);
  }
}

Launch& launch_state(const char* what) {
  if (!active || !active->b || active->b->current < 0) fail(fmt::format("{} called outside a kernel", what));
  return *active;
}

Thread& me() {
  Launch& l = launch_state("a CUDA built-in");
  return l.b->threads[static_cast<std::size_t>(l.b->current)];
}

// Suspends the running CUDA thread and returns to the scheduler until it is made ready again.
void yield() {
  Thread& t = me();
  t.sink = std::move(t.sink).resume();
}

int live(const Block& b) { return static_cast<int>(b.threads.size()) - b.exited; }

// Every live thread is at a barrier (or the last one just arrived, `arriving`): synccheck looks at where
// they wait, then they all go on into the next epoch.
void release_barrier(Launch& l, Block& b, Thread* arriving) {
  if (checking()) check_barrier(l, b, arriving);
  std::vector<int>& ids = b.waking;
  ids.clear();
  for (Thread& t : b.threads)
    if (t.state == State::at_barrier) ids.push_back(t.linear);
  b.at_barrier = 0;
  ++b.barriers;
  // Under a random schedule the last to arrive does not always go on first: it waits its turn with the rest.
  if (arriving && scheduling().order == Schedule::random) {
    ids.push_back(arriving->linear);
    make_ready(b, ids);
    yield();
    return;
  }
  make_ready(b, ids);
}

std::string where(const Launch& l) {
  return fmt::format("block ({}, {}, {})", l.block_idx.x, l.block_idx.y, l.block_idx.z);
}

// A thread that returned: it counts as arrived at a barrier the others wait at; a warp collective waiting
// for it can never complete.
void thread_exited(Launch& l, Block& b, int id) {
  b.threads[static_cast<std::size_t>(id)].state = State::done;
  ++b.exited;
  const WarpOp& op = b.warps[static_cast<std::size_t>(id / 32)];
  if (op.active && (op.mask >> (id % 32) & 1u) && !(op.arrived >> (id % 32) & 1u))
    fail(fmt::format("warp collective: lane {} of warp {} in {} is in the mask but has exited", id % 32, id / 32,
                     where(l)));
  if (b.at_barrier > 0 && b.at_barrier == live(b)) release_barrier(l, b, nullptr);
}

// A fiber runs CUDA threads one after another as plain calls, starting with `first`: while the next ready
// thread has not started, it needs no fiber of its own. Only a thread that must wait (a barrier, a warp
// collective) keeps the fiber it runs on, and the scheduler starts a new one for the rest. So a kernel
// without barriers costs one fiber per block, not one per thread, and the order threads run in is the same.
ctx::fiber start_runner(Launch& l, Block& b, StackPool& pool, int first) {
  return ctx::fiber(std::allocator_arg, PoolAllocator{&pool}, [&b, first, &l](ctx::fiber&& sink) {
    int id = first;
    b.threads[static_cast<std::size_t>(id)].sink = std::move(sink);
    for (;;) {
      Thread& self = b.threads[static_cast<std::size_t>(id)];
      self.state = State::ready;
      enter(b, id);
      try {
        (*l.body)();
      } catch (const std::exception&) {  // not catch (...): Boost unwinds a destroyed fiber by a throw of its own
        if (!l.error) l.error = std::current_exception();
        return std::move(self.sink);
      }
      thread_exited(l, b, id);
      if (b.ready.empty()) return std::move(self.sink);
      const int next = b.ready.front();
      Thread& t = b.threads[static_cast<std::size_t>(next)];
      if (t.state != State::not_started) return std::move(self.sink);  // the scheduler resumes it
      b.ready.pop_front();
      t.sink = std::move(self.sink);
      id = next;
    }
  });
}

void run_block(Launch& l) {
  Block& b = *l.b;
  StackPool& pool = *[] {
    static thread_local StackPool p;
    return &p;
  }();
  const int n = static_cast<int>(b.threads.size());
  b.waking.resize(static_cast<std::size_t>(n));
  std::iota(b.waking.begin(), b.waking.end(), 0);
  make_ready(b, b.waking);
  while (!b.ready.empty()) {
    const int id = b.ready.front();
    b.ready.pop_front();
    Thread& t = b.threads[static_cast<std::size_t>(id)];
    ctx::fiber f = t.state == State::not_started ? start_runner(l, b, pool, id) : std::move(t.fiber);
    t.state = State::ready;
    enter(b, id);
    f = std::move(f).resume();
    // The fiber came back with the thread it ran last: suspended (it keeps the fiber) or returned (f is empty).
    b.threads[static_cast<std::size_t>(b.current)].fiber = std::move(f);
    enter(b, -1);
    if (l.error) {  // as a trap on a GPU ends the grid: no thread runs further
      for (Thread& other : b.threads) other.fiber = ctx::fiber();  // unwinds the suspended ones' stacks
      b.ready.clear();
      return;
    }
  }
  if (b.exited != n) {
    int barrier = 0, warp = 0;
    for (const Thread& t : b.threads) barrier += t.state == State::at_barrier, warp += t.state == State::at_warp;
    fail(
        fmt::format("deadlock in {}: {} threads wait at __syncthreads, {} at warp collectives, {} have exited; "
                    "none can go on (a __syncthreads or a warp collective that not every thread reaches?)",
                    where(l), barrier, warp, b.exited));
  }
}

}  // namespace

void* dynamic_shared() { return launch_state("dynamic shared memory").b->shared->data(); }
void set_schedule(Schedule order, std::uint64_t seed) {
  scheduling().order = order;
  scheduling().rng.seed(seed);
}
Schedule schedule() { return scheduling().order; }

void run_grid(const void* kernel, dim3 grid, dim3 block, std::size_t shared_bytes, const std::function<void()>& body) {
  const std::uint64_t threads = std::uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || std::uint64_t{grid.x} * grid.y * grid.z == 0)
    fail(fmt::format("empty launch: grid ({}, {}, {}), block ({}, {}, {})", grid.x, grid.y, grid.z, block.x, block.y,
                     block.z));
  if (threads > 1024 || block.z > 64)
    fail(fmt::format("block size {} > 1024 (block ({}, {}, {})): a CUDA block has at most 1024 threads, z at most 64",
                     threads, block.x, block.y, block.z));
  if (active) fail("a kernel launched another kernel (dynamic parallelism is not emulated)");
  // Boost's fiber switch restores MXCSR; when its sticky exception bits differ between fibers every switch
  // stalls. Setting them all for the launch keeps them equal (measured: 6x faster switches).
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x3f);
  static std::uint32_t launches = 0;
  Launch l;
  l.grid = grid, l.block = block, l.id = ++launches, l.kernel = kernel, l.body = &body;
  active = &l;
  if (checking()) check_launch_begin(l);
  Block b;  // one for the whole launch, reset for each block
  b.shared = &dynamic_shared_memory();
  b.threads.resize(threads);
  for (unsigned i = 0; i < threads; ++i) {
    b.threads[i].linear = static_cast<int>(i);
    b.threads[i].idx = {i % block.x, i / block.x % block.y, i / (block.x * block.y)};
  }
  b.warps.resize((threads + 31) / 32);
  b.warp_syncs.resize(b.warps.size());
  for (unsigned z = 0; z < grid.z && !l.error; ++z)
    for (unsigned y = 0; y < grid.y && !l.error; ++y)
      for (unsigned x = 0; x < grid.x && !l.error; ++x) {
        for (Thread& t : b.threads) t.state = State::not_started;
        for (WarpOp& w : b.warps) w.active = false;
        b.exited = b.at_barrier = 0;
        b.barriers = 0;
        std::fill(b.warp_syncs.begin(), b.warp_syncs.end(), 0u);
        b.shared->assign(shared_bytes, 0xFF);  // poison: a read before any write is NaN
        l.block_idx = {x, y, z};
        running.block_idx = l.block_idx, running.block_dim = block, running.grid_dim = grid;
        l.block_linear = x + grid.x * (y + grid.y * z);
        l.b = &b;
        if (checking()) check_block_begin(l);
        run_block(l);
        if (checking()) check_block_end(l);
      }
  active = nullptr;
  _mm_setcsr(csr);
  if (checking()) check_launch_end(l);  // throws CheckError for reports, or for the trap that ended the launch
  if (l.error) std::rethrow_exception(l.error);
}

void syncthreads(Site site) {
  Launch& l = launch_state("__syncthreads");
  Block& b = *l.b;
  Thread& t = me();
  t.site = site;
  ++b.at_barrier;
  if (b.at_barrier == live(b)) {  // the last to arrive releases the others and goes on
    release_barrier(l, b, &t);
    return;
  }
  t.state = State::at_barrier;
  yield();
}

namespace {

// Arrives at the warp's collective; returns this lane's result once every lane of the mask has arrived.
std::uint64_t collective(int kind, unsigned mask, std::uint64_t value, Shuffle mode, int arg, int width,
                         const char* name, Site site) {
  Launch& l = launch_state(name);
  Block& b = *l.b;
  Thread& t = me();
  t.site = site;
  const int warp = t.linear / 32, lane = t.linear % 32;
  const int lanes_here = std::min(32, static_cast<int>(b.threads.size()) - warp * 32);
  const unsigned present = lanes_here == 32 ? 0xffffffffu : (1u << lanes_here) - 1;
  if (!(mask >> lane & 1u))
    fail(fmt::format("{}: lane {} of warp {} in {} is not in its own mask {:#010x}", name, lane, warp, where(l), mask));
  if (width < 1 || width > 32 || (width & (width - 1)))
    fail(fmt::format("{}: width {} is not a power of 2 in [1, 32]", name, width));
  WarpOp& op = b.warps[static_cast<std::size_t>(warp)];
  if (!op.active) {
    op.active = true, op.kind = kind, op.mode = mode, op.mask = mask, op.width = width, op.arrived = 0;
    for (int k = 0; k < 32; ++k)  // a lane of the mask that has returned can never arrive
      if ((mask & present) >> k & 1u && b.threads[static_cast<std::size_t>(warp * 32 + k)].state == State::done)
        fail(fmt::format("{}: lane {} of warp {} in {} is in the mask but has exited", name, k, warp, where(l)));
  } else if (op.kind != kind || op.mask != mask || op.mode != mode || op.width != width) {
    fail(
        fmt::format("{}: lanes of warp {} in {} disagree: lane {} passes mask {:#010x}, others {:#010x} (or another "
                    "collective)",
                    name, warp, where(l), lane, mask, op.mask));
  }
  op.values[lane] = value;
  const int segment = lane / width * width;
  int src = lane;
  switch (mode) {  // PTX shfl.sync: a source outside the lane's segment (up/down/bfly) gives its own value
    case Shuffle::idx: src = segment + ((arg % width) + width) % width; break;
    case Shuffle::up: src = lane - segment >= arg ? lane - arg : lane; break;
    case Shuffle::down: src = lane - segment + arg < width ? lane + arg : lane; break;
    case Shuffle::bfly: src = (lane ^ arg) < segment + width ? lane ^ arg : lane; break;
  }
  op.sources[lane] = src;
  op.arrived |= 1u << lane;
  if (op.arrived != (mask & present)) {
    t.state = State::at_warp;
    yield();
    return t.result;
  }
  // The last lane computes everyone's result and wakes the others.
  if (checking()) check_warp(l, b, warp, op.arrived);
  if (kind == 2) ++b.warp_syncs[static_cast<std::size_t>(warp)];  // __syncwarp orders the warp's memory
  std::vector<int>& woken = b.waking;
  woken.clear();
  unsigned votes = 0;
  for (int k = 0; k < 32; ++k)
    if (op.arrived >> k & 1u) votes |= (op.values[k] != 0) << k;
  if (kind == 3) {
    if (op.arrived != 0xffffffffu)
      fail(fmt::format("mma.sync: warp {} in {} has {} lanes; the instruction needs all 32", warp, where(l),
                       __builtin_popcount(op.arrived)));
    mma_bf16(op.values);  // each value: the address of a lane's MmaFragments
  }
  for (int k = 0; k < 32; ++k) {
    if (!(op.arrived >> k & 1u)) continue;
    const int s = op.sources[k];
    const bool readable = s >= 0 && s < 32 && (op.arrived >> s & 1u);
    Thread& other = b.threads[static_cast<std::size_t>(warp * 32 + k)];
    other.result = kind == 1 ? votes : readable ? op.values[s] : ~std::uint64_t{0};  // absent lane: poison
    if (k != lane) woken.push_back(other.linear);
  }
  op.active = false;
  make_ready(b, woken);
  return t.result;
}

}  // namespace

std::uint64_t shuffle(unsigned mask, std::uint64_t value, Shuffle mode, int arg, int width, Site site) {
  return collective(0, mask, value, mode, arg, width, "__shfl_sync", site);
}
unsigned ballot(unsigned mask, bool predicate, Site site) {
  return static_cast<unsigned>(collective(1, mask, predicate, Shuffle::idx, 0, 32, "__ballot_sync", site));
}
void syncwarp(unsigned mask, Site site) { collective(2, mask, 0, Shuffle::idx, 0, 32, "__syncwarp", site); }
void mma_m16n8k16_bf16(float d[4], const std::uint32_t a[4], const std::uint32_t b[2], Site site) {
  MmaFragments mine{d, a, b};
  collective(3, 0xffffffffu, reinterpret_cast<std::uint64_t>(&mine), Shuffle::idx, 0, 32, "mma.sync", site);
}

}  // namespace cudasim
