// cuda-sim's scheduler: fibers for CUDA threads, one block at a time, barriers and warp collectives.
#include "cudasim/cudasim.h"

#include <fmt/format.h>
#include <xmmintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "checker.h"
#include "scheduler.h"
#include "stack_pool.h"
#include "workers.h"

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

namespace {

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

}  // namespace

// Puts `ids` on the ready queue in the schedule's order.
void detail::make_ready(Block& b, std::vector<int>& ids) {
  Scheduling& s = scheduling();
  if (s.order == Schedule::reverse) std::reverse(ids.begin(), ids.end());
  if (s.order == Schedule::random) std::shuffle(ids.begin(), ids.end(), s.rng);
  for (const int id : ids) {
    Thread& t = b.threads[static_cast<std::size_t>(id)];
    if (t.state != State::not_started) t.state = State::ready;  // a thread not yet started starts when its turn comes
    b.ready.push_back(id);
  }
}

Launch& detail::launch_state(const char* what) {
  if (!active || !active->b || active->b->current < 0) fail(fmt::format("{} called outside a kernel", what));
  return *active;
}

Thread& detail::me() {
  Launch& l = launch_state("a CUDA built-in");
  return l.b->threads[static_cast<std::size_t>(l.b->current)];
}

namespace {

Context start_fiber(Launch& l, Block& b, int first);
StackPool& stack_pool() {
  static thread_local StackPool pool;
  return pool;
}

// Makes thread `id` (taken from the ready queue) the running one; the context to switch to for it.
Context resume_point(Launch& l, Block& b, int id) {
  Thread& t = b.threads[static_cast<std::size_t>(id)];
  const Context to = t.state == State::not_started ? start_fiber(l, b, id) : t.context;
  t.state = State::ready;
  enter(b, id);
  return to;
}

}  // namespace

// Suspends the running CUDA thread until it is made ready again. The next ready thread runs at once, switched
// to straight from here (one fiber switch, not two through the scheduler); with none ready, back to the
// scheduler, which finds deadlocks.
void detail::yield() {
  Launch& l = *active;
  Block& b = *l.b;
  Thread& t = b.threads[static_cast<std::size_t>(b.current)];
  Context to = b.scheduler;
  if (!b.ready.empty()) {
    const int id = b.ready.front();
    b.ready.pop_front();
    if (id == t.linear) {  // a random schedule put it first again
      t.state = State::ready;
      return;
    }
    to = resume_point(l, b, id);
  }
  cudasim_switch(&t.context, to);
}

namespace {

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

}  // namespace

std::string detail::where(const Launch& l) {
  return fmt::format("block ({}, {}, {})", l.block_idx.x, l.block_idx.y, l.block_idx.z);
}

namespace {

// A thread that returned: it counts as arrived at a barrier the others wait at; a warp collective waiting
// for it can never complete, which ends the launch with the collective's CheckError (false then).
bool thread_exited(Launch& l, Block& b, int id) {
  b.threads[static_cast<std::size_t>(id)].state = State::done;
  ++b.exited;
  const WarpOp& op = b.warps[static_cast<std::size_t>(id / 32)];
  if (op.active && (op.mask >> (id % 32) & 1u) && !(op.arrived >> (id % 32) & 1u)) {
    if (!l.error) l.error = lane_exited(l, id / 32, op);
    return false;
  }
  if (b.at_barrier > 0 && b.at_barrier == live(b)) release_barrier(l, b, nullptr);
  return true;
}

// A fiber runs CUDA threads one after another as plain calls, starting with `first`: while the next ready
// thread has not started, it needs no fiber of its own. Only a thread that must wait (a barrier, a warp
// collective) keeps the fiber it runs on, and a new one starts for the rest. So a kernel without barriers
// costs one fiber per block, not one per thread, and the order threads run in is the same.
struct Runner {
  Launch* l;
  Block* b;
  int first;
  void* stack;
};

[[noreturn]] void run_threads(void* arg) {
  const Runner r = *static_cast<Runner*>(arg);
  Launch& l = *r.l;
  Block& b = *r.b;
  bool failed = false;
  for (int id = r.first;;) {
    Thread& self = b.threads[static_cast<std::size_t>(id)];
    self.state = State::ready, self.stack = r.stack;
    enter(b, id);
    try {
      (*l.body)();
    } catch (...) {  // the launch ends here, as a trap ends a grid
      if (!l.error) l.error = std::current_exception();
      failed = true, self.stack = nullptr;
      break;
    }
    self.stack = nullptr;
    if (!thread_exited(l, b, id)) {
      failed = true;
      break;
    }
    if (b.ready.empty() || b.threads[static_cast<std::size_t>(b.ready.front())].state != State::not_started) break;
    id = b.ready.front();
    b.ready.pop_front();
  }
  // Done: the stack goes back to the pool and the next ready thread (or the scheduler) runs. Nothing switches
  // back here.
  Context to = b.scheduler;
  if (!failed && !b.ready.empty()) {
    const int next = b.ready.front();
    b.ready.pop_front();
    to = resume_point(l, b, next);
  }
  stack_pool().deallocate(r.stack);
  static thread_local Context finished;
  cudasim_switch(&finished, to);
  __builtin_unreachable();
}

Context start_fiber(Launch& l, Block& b, int first) {
  void* top = stack_pool().allocate();
  // The runner's arguments at the top of its own stack; its first frame below them.
  auto* arg = reinterpret_cast<Runner*>(static_cast<char*>(top) - 64);
  *arg = Runner{&l, &b, first, top};
  return make_context(arg, run_threads, arg);
}

void run_block(Launch& l) {
  Block& b = *l.b;
  const int n = static_cast<int>(b.threads.size());
  b.waking.resize(static_cast<std::size_t>(n));
  std::iota(b.waking.begin(), b.waking.end(), 0);
  make_ready(b, b.waking);
  while (!b.ready.empty()) {
    const int id = b.ready.front();
    b.ready.pop_front();
    // Threads run, switching among themselves, until none is ready or one ends the launch.
    cudasim_switch(&b.scheduler, resume_point(l, b, id));
    enter(b, -1);
    if (l.error) {                 // as a trap on a GPU ends the grid: no thread runs further
      for (Thread& t : b.threads)  // the suspended ones are abandoned; their stacks go back to the pool
        if (t.stack != nullptr) stack_pool().deallocate(t.stack), t.stack = nullptr;
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

namespace {

// One OS thread's share of a grid: blocks taken in turn from `next` until none is left or an error (here or on
// another OS thread, `stop`) ends the launch. `l` is this thread's copy of the launch: its block is its own.
void run_blocks(Launch& l, std::size_t shared_bytes, std::atomic<std::uint64_t>& next, std::atomic<bool>& stop) {
  const dim3 grid = l.grid, block = l.block;
  const std::uint64_t blocks = std::uint64_t{grid.x} * grid.y * grid.z;
  const unsigned threads = block.x * block.y * block.z;
  Block b;  // one per OS thread for the whole launch, reset for each block
  b.shared = &dynamic_shared_memory();
  b.threads.resize(threads);
  for (unsigned i = 0; i < threads; ++i) {
    b.threads[i].linear = static_cast<int>(i);
    b.threads[i].idx = {i % block.x, i / block.x % block.y, i / (block.x * block.y)};
  }
  b.warps.resize((threads + 31) / 32);
  b.warp_syncs.resize(b.warps.size());
  l.b = &b;
  for (std::uint64_t i; !stop.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < blocks;) {
    for (Thread& t : b.threads) t.state = State::not_started;
    for (WarpOp& w : b.warps) w.active = false;
    b.exited = b.at_barrier = 0;
    b.barriers = 0;
    std::fill(b.warp_syncs.begin(), b.warp_syncs.end(), 0u);
    b.shared->assign(shared_bytes, 0xFF);  // poison: a read before any write is NaN
    l.block_linear = static_cast<std::uint32_t>(i);
    l.block_idx = {static_cast<unsigned>(i % grid.x), static_cast<unsigned>(i / grid.x % grid.y),
                   static_cast<unsigned>(i / (std::uint64_t{grid.x} * grid.y))};
    running.block_idx = l.block_idx, running.block_dim = block, running.grid_dim = grid;
    if (checking()) check_block_begin(l);
    run_block(l);
    if (checking()) check_block_end(l);
    if (l.error) stop = true;
  }
  l.b = nullptr;
}

// How many OS threads run this grid's blocks. One where every block must share one OS thread: in the checking
// build (its __shared__ variables are one static section the checker watches), with checks or the profiler on,
// and under a random schedule (one generator orders every block's threads, so that a seed replays). Otherwise
// up to os_threads(), with at least 256 CUDA threads each: a grid of one block, or of a few small ones, costs
// less than waking a thread (the toy demo: 1024 here left two-block GEMMs on one OS thread, 8.3 s; 256, 6.1 s;
// 128, 6.1 s).
unsigned os_threads_for([[maybe_unused]] std::uint64_t blocks, [[maybe_unused]] std::uint64_t threads_per_block) {
#if defined(CUDASIM_CHECK)
  return 1;
#else
  if (checking() || scheduling().order == Schedule::random) return 1;
  const std::uint64_t by_size = std::max<std::uint64_t>(1, blocks * threads_per_block / 256);
  return static_cast<unsigned>(std::min<std::uint64_t>({os_threads(), blocks, by_size}));
#endif
}

}  // namespace

void run_grid(const void* kernel, dim3 grid, dim3 block, std::size_t shared_bytes, const std::function<void()>& body) {
  const std::uint64_t threads = std::uint64_t{block.x} * block.y * block.z;
  const std::uint64_t blocks = std::uint64_t{grid.x} * grid.y * grid.z;
  if (threads == 0 || blocks == 0)
    fail(fmt::format("empty launch: grid ({}, {}, {}), block ({}, {}, {})", grid.x, grid.y, grid.z, block.x, block.y,
                     block.z));
  if (threads > 1024 || block.z > 64)
    fail(fmt::format("block size {} > 1024 (block ({}, {}, {})): a CUDA block has at most 1024 threads, z at most 64",
                     threads, block.x, block.y, block.z));
  if (active) fail("a kernel launched another kernel (dynamic parallelism is not emulated)");
  static std::uint32_t launches = 0;
  const unsigned n = os_threads_for(blocks, threads);
  std::vector<Launch> parts(n);  // each OS thread's view of the launch
  for (Launch& l : parts) l.grid = grid, l.block = block, l.id = launches + 1, l.kernel = kernel, l.body = &body;
  ++launches;
  if (checking()) check_launch_begin(parts[0]);
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> stop{false};
  run_on_threads(n, [&](unsigned k) {
    // Every fiber of this OS thread shares one MXCSR (the switch leaves it alone): its sticky exception bits
    // set for the launch, so that no kernel's arithmetic flips them (when Boost's switch restored MXCSR,
    // differing bits stalled every switch; measured: 6x).
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x3f);
    active = &parts[k];
    try {
      run_blocks(parts[k], shared_bytes, next, stop);
    } catch (...) {  // cuda-sim's own failures, kept for the host as a CUDA thread's exception is (not thrown
                     // on a pool thread, which would end the process)
      if (!parts[k].error) parts[k].error = std::current_exception();
      stop = true;
    }
    active = nullptr;
    _mm_setcsr(csr);
  });
  if (checking()) check_launch_end(parts[0]);  // throws CheckError for reports, or for the trap that ended the launch
  for (const Launch& l : parts)
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

}  // namespace cudasim
