// The kernel checker's access hook (cudasim/check.h): every load and store of kernel code, through the hooks
// that clang's -fsanitize-coverage=trace-loads,trace-stores calls, checked by memcheck (bounds, frees,
// alignment), initcheck (reads of bytes nothing wrote) and racecheck against the shadow (arena.h). Two accesses
// race when neither is ordered before the other: same launch, and different blocks (global memory), or same
// block, different threads, same barrier epoch and, within one warp, same __syncwarp epoch.
// Beside it: arena.cpp (device memory), reports.cpp (reports, switches), synccheck.cpp (barriers).
#include "cudasim/check.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "arena.h"
#include "checker.h"
#include "reports.h"
#include "symbols.h"

#if defined(CUDASIM_CHECK)
// The linker's bounds of the section every __shared__ variable lives in (cudasim.h); weak: a program may
// have none.
extern "C" char __start_cudasim_shared[] __attribute__((weak));
extern "C" char __stop_cudasim_shared[] __attribute__((weak));
#endif

namespace cudasim {

using namespace detail;

namespace {

struct Region {
  enum Kind { global, shared_static, shared_dynamic } kind;
  std::uintptr_t start = 0;
  Allocation* allocation = nullptr;
  Cell* cells = nullptr;  // of the region's first byte
};

std::uintptr_t shared_begin = 0;
std::size_t shared_bytes = 0;
// NotCounted's depth on this OS thread (a block's CUDA threads all run on one; none yields inside one).
thread_local int not_counted = 0;
std::vector<Cell> shared_cells;   // static __shared__ variables (the cudasim_shared section)
std::vector<Cell> dynamic_cells;  // the launch's dynamic shared memory
std::uintptr_t dynamic_begin = 0;
std::size_t dynamic_bytes = 0;

// The static __shared__ variables, in address order, and per byte of the section whether a variable holds it
// (not a gap of cudasim.h's __shared__, not alignment padding): built once, at the first launch.
std::vector<Symbol> shared_variables;
std::vector<unsigned char> shared_held;

[[maybe_unused]] void map_shared_variables() {
  static bool mapped = false;
  if (mapped) return;
  mapped = true;
  shared_held.assign(shared_bytes, 0);
  for (Symbol& s : symbols_within(shared_begin, shared_begin + shared_bytes)) {
    if (s.name.rfind("cudasim_shared_gap_", 0) == 0) continue;
    std::fill_n(shared_held.begin() + static_cast<std::ptrdiff_t>(s.start - shared_begin), s.size, 1);
    shared_variables.push_back(std::move(s));
  }
  if (shared_variables.empty()) std::fill(shared_held.begin(), shared_held.end(), 1);  // stripped: cannot tell
}

// Where an access outside every static __shared__ variable lies: past the end of the variable before it, or
// before the one after, whichever is nearer.
std::string outside_shared_variables(std::uintptr_t a) {
  const auto after = std::upper_bound(shared_variables.begin(), shared_variables.end(), a,
                                      [](std::uintptr_t v, const Symbol& s) { return v < s.start; });
  const Symbol* before = after == shared_variables.begin() ? nullptr : &*std::prev(after);
  if (before && a < before->start + before->size)  // starts inside it, runs past its end
    return fmt::format("shared {} ({} bytes), running past its end", before->name, before->size);
  const std::size_t past = before ? a - (before->start + before->size) : SIZE_MAX;
  const std::size_t ahead = after != shared_variables.end() ? after->start - a : SIZE_MAX;
  if (before && past <= ahead)
    return fmt::format("{} bytes past the end of shared {} ({} bytes)", past, before->name, before->size);
  if (ahead != SIZE_MAX) return fmt::format("{} bytes before shared {} ({} bytes)", ahead, after->name, after->size);
  return fmt::format("shared memory + byte {}, in no __shared__ variable", a - shared_begin);
}

std::string describe(const Region& r, std::uintptr_t a, unsigned size) {
  const std::size_t offset = a - r.start;
  const std::string element =
      offset % size == 0 ? fmt::format("element {}", offset / size) : fmt::format("byte {}", offset);
  switch (r.kind) {
    case Region::shared_dynamic: return "dynamic shared memory + " + element;
    case Region::shared_static: {
      const SymbolName s = symbol_at(reinterpret_cast<const void*>(a));
      if (!s.found) return fmt::format("shared memory + byte {}", offset);
      return fmt::format(
          "shared {} + {}", s.name,
          s.offset % size == 0 ? fmt::format("element {}", s.offset / size) : fmt::format("byte {}", s.offset));
    }
    case Region::global: break;
  }
  return fmt::format("allocation {:#x} ({} bytes) + {}", r.start, r.allocation->bytes, element);
}

const char* verb(bool write, bool atomic) { return atomic ? "updates atomically" : write ? "writes" : "reads"; }

// True when `p` is ordered before the running access (or is no access of this launch at all).
bool ordered(const Access& p, const Access& now, bool global) {
  if (p.launch != now.launch) return true;
  if (p.block != now.block) return !global;  // shared: another block's memory; global: blocks are concurrent
  if (p.thread == now.thread || p.epoch != now.epoch) return true;
  return p.thread / 32 == now.thread / 32 && p.warp_epoch != now.warp_epoch;
}

bool hazard(const Access& p, const Access& now, bool global) {
  return !ordered(p, now, global) && !(p.atomic && now.atomic);
}

// A memcheck error: reported, and the access must not happen: it ends the launch as a trap ends a grid.
[[noreturn]] void trap(const Launch& l, const char* kind, const std::string& location, const std::string& joint,
                       std::uintptr_t a, unsigned size, bool write, bool atomic, const void* code) {
  const Thread& t = l.b->threads[static_cast<std::size_t>(l.b->current)];
  check::Report rep;
  rep.checker = "memcheck", rep.kind = kind, rep.block = l.block_idx, rep.thread = t.idx, rep.location = location;
  rep.message = fmt::format("thread {} of block {} {} {} bytes at {:#x} (at {}){}{}", text(t.idx), text(l.block_idx),
                            verb(write, atomic), size, a, code_site(code), joint, location);
  report(l, std::move(rep), code);
  trapped = true;
  throw Trap{};
}

void access(const void* address, unsigned size, bool write, bool atomic, const void* code) {
  Launch* l = active;
  if (l == nullptr || l->b == nullptr || l->b->current < 0) return;
  const Block& b = *l->b;
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  if (profiling_on && !atomic && not_counted == 0) {
    const bool shared = a - shared_begin < shared_bytes || a - dynamic_begin < dynamic_bytes;
    if (shared || arena().contains(a)) profile_access(*l, a, size, write, shared, code);
  }
  if (enabled_checks == 0) return;
  Region r{Region::global};
  if (a - shared_begin < shared_bytes) {
    r = {Region::shared_static, shared_begin, nullptr, shared_cells.data()};
    const unsigned char* held = shared_held.data();
    const std::size_t at = a - shared_begin, end = std::min<std::size_t>(at + size, shared_bytes);
    if ((enabled_checks & check::mem) && std::find(held + at, held + end, 0) != held + end)
      trap(*l, "out of bounds", outside_shared_variables(a), ": ", a, size, write, atomic, code);
  } else if (a - dynamic_begin < dynamic_bytes) {
    r = {Region::shared_dynamic, dynamic_begin, nullptr, dynamic_cells.data()};
    if (a + size > dynamic_begin + dynamic_bytes && (enabled_checks & check::mem))  // straddles the end
      trap(*l, "out of bounds", describe(r, a, size), ", past the end of ", a, size, write, atomic, code);
  } else if (b.shared && b.shared->beside(a)) {  // just outside the launch's dynamic shared memory
    if (!(enabled_checks & check::mem)) return;
    const std::string location =
        a >= dynamic_begin + dynamic_bytes
            ? fmt::format("{} bytes past the end of dynamic shared memory ({} bytes)",
                          a - (dynamic_begin + dynamic_bytes), dynamic_bytes)
            : fmt::format("{} bytes before dynamic shared memory ({} bytes)", dynamic_begin - a, dynamic_bytes);
    trap(*l, "out of bounds", location, ": ", a, size, write, atomic, code);
  } else if (arena().contains(a)) {
    std::pair<std::uintptr_t, Allocation*> nearest{0, nullptr};
    const auto [start, found] = arena().find(a, &nearest);
    if (found == nullptr || found->freed) {
      if (!(enabled_checks & check::mem)) return;
      const auto [near_start, near] = found ? std::pair{start, found} : nearest;
      std::string location;
      if (near == nullptr) {
        location = fmt::format("{:#x}, no device allocation near it", a);
      } else if (found) {
        location = fmt::format("allocation {:#x} ({} bytes, freed) + byte {}", near_start, near->bytes, a - start);
      } else if (a >= near_start + near->bytes) {
        location = fmt::format("{} bytes past the end of allocation {:#x} ({} bytes{})", a - (near_start + near->bytes),
                               near_start, near->bytes, near->freed ? ", freed" : "");
      } else {
        location = fmt::format("{} bytes before allocation {:#x} ({} bytes{})", near_start - a, near_start, near->bytes,
                               near->freed ? ", freed" : "");
      }
      trap(*l, found ? "use after free" : "out of bounds", location, ": ", a, size, write, atomic, code);
    }
    r = {Region::global, start, found, nullptr};
    if (a + size > start + found->bytes && (enabled_checks & check::mem))  // straddles the end
      trap(*l, "out of bounds", describe(r, a, size), ", past the end of ", a, size, write, atomic, code);
    r.cells = shadow_of(*found).data();
  } else {
    return;  // host memory: the kernel's stack, its arguments, cuda-sim's own state
  }
  const Thread& t = b.threads[static_cast<std::size_t>(b.current)];
  const bool global = r.kind == Region::global;
  if ((enabled_checks & check::mem) && a % size != 0)
    trap(*l, "misaligned", describe(r, a, size), fmt::format(", not a multiple of {}: ", size), a, size, write, atomic,
         code);
  const auto thread = static_cast<std::uint16_t>(b.current);
  const Access now{l->id,
                   l->block_linear,
                   b.barriers,
                   thread,
                   static_cast<std::uint16_t>(b.warp_syncs[static_cast<std::size_t>(b.current / 32)]),
                   atomic};
  Cell* cells = r.cells + (a - r.start);
  const bool reads = !write || atomic;
  if ((enabled_checks & check::init) && reads) {
    for (unsigned k = 0; k < size; ++k) {
      const Cell& c = cells[k];
      const bool written =
          global ? c.written_launch != 0 : c.written_launch == l->id && c.written_block == l->block_linear;
      if (written) continue;
      check::Report rep;
      rep.checker = "initcheck", rep.kind = "uninitialised read", rep.block = l->block_idx, rep.thread = t.idx;
      rep.location = describe(r, a, size);
      rep.message = fmt::format("thread {} of block {} {} {} (at {}), which {}", text(t.idx), text(l->block_idx),
                                verb(false, atomic), rep.location, code_site(code),
                                global ? "nothing wrote since it was allocated" : "no thread of this block wrote");
      report(*l, std::move(rep), code);
      break;
    }
  }
  if (enabled_checks & check::race) {
    for (unsigned k = 0; k < size; ++k) {
      const Cell& c = cells[k];
      const Access* other = nullptr;
      const char* kind = nullptr;
      if (hazard(c.write, now, global)) {
        other = &c.write, kind = write ? "write-write" : "read-after-write";
      } else if (write && hazard(c.read, now, global)) {
        other = &c.read, kind = "write-after-read";
      } else if (write && hazard(c.other_read, now, global)) {
        other = &c.other_read, kind = "write-after-read";
      }
      if (other == nullptr) continue;
      check::Report rep;
      rep.checker = "racecheck", rep.kind = kind, rep.block = l->block_idx, rep.thread = t.idx;
      rep.has_other = true;
      rep.other_block = coords(other->block, l->grid);
      rep.other_thread = coords(other->thread, l->block);
      rep.location = describe(r, a, size);
      const bool other_wrote = other == &c.write;
      rep.message = fmt::format(
          "thread {} of block {} {} {} (at {}) where thread {} of block {} {}, {}", text(t.idx), text(l->block_idx),
          verb(write, atomic), rep.location, code_site(code), text(rep.other_thread), text(rep.other_block),
          other_wrote ? (other->atomic ? "updated atomically" : "wrote") : "read",
          other->block != l->block_linear ? "and blocks are not ordered (an atomic, or a second launch, orders them)"
                                          : "with no barrier between");
      report(*l, std::move(rep), code);
      break;
    }
  }
  for (unsigned k = 0; k < size; ++k) {
    Cell& c = cells[k];
    if (write) {
      c.write = now;
      c.read = c.other_read = Access{};
      c.written_launch = l->id, c.written_block = l->block_linear;
    } else {
      if (c.read.launch != now.launch || c.read.block != now.block || c.read.thread != now.thread)
        c.other_read = c.read;
      c.read = now;
    }
  }
}

}  // namespace

// --- the scheduler's side -------------------------------------------------------------------------------

namespace detail {

void check_launch_begin(Launch& l) {
  if (profiling_on) profile_launch_begin(l);
  this_launch.clear();
  seen.clear();
  trapped = false;
#if defined(CUDASIM_CHECK)
  shared_begin = reinterpret_cast<std::uintptr_t>(__start_cudasim_shared);
  shared_bytes = static_cast<std::size_t>(__stop_cudasim_shared - __start_cudasim_shared);
  map_shared_variables();
#endif
  shared_cells.assign(shared_bytes, Cell{});
}

void check_block_begin(Launch& l) {
  dynamic_begin = reinterpret_cast<std::uintptr_t>(l.b->shared->data());
  dynamic_bytes = l.b->shared->size();
  if (dynamic_cells.size() < dynamic_bytes) dynamic_cells.resize(dynamic_bytes);
  if (shared_bytes && shared_begin) std::memset(reinterpret_cast<void*>(shared_begin), 0xFF, shared_bytes);  // poison
  if (profiling_on) profile_block_begin(l);
}

void check_block_end(Launch&) {
  if (profiling_on) profile_block_end();
}

void check_launch_end(Launch& l) {
  dynamic_begin = 0, dynamic_bytes = 0;
  const bool ended_by_trap = trapped;
  trapped = false;
  if (this_launch.empty()) return;
  for (const check::Report& r : this_launch)
    if (r.repeats > 0)
      std::fprintf(stderr, "cuda-sim %s: %s in kernel %s: %d more like it at the same code in this launch\n",
                   r.checker.c_str(), r.kind.c_str(), r.kernel.c_str(), r.repeats);
  const std::size_t count = this_launch.size();
  const std::string first = this_launch.front().message;
  kept.insert(kept.end(), this_launch.begin(), this_launch.end());
  this_launch.clear();
  if (on_report == check::OnReport::record && !ended_by_trap) return;
  l.error = nullptr;  // the trap's exception: CheckError says more
  throw check::CheckError(fmt::format("cuda-sim found {} problem{} in a launch{}: {}", count, count > 1 ? "s" : "",
                                      ended_by_trap ? " (it trapped)" : "", first));
}

}  // namespace detail

NotCounted::NotCounted() { ++not_counted; }
NotCounted::~NotCounted() { --not_counted; }

// --- atomics (out of line: not seen as plain loads and stores) ---------------------------------------------

namespace {
// Atomic for real: blocks may run on several OS threads at once (workers.h).
template <class T, class Op>
T read_modify_write(T* address, T value, Op op, const void* code) {
  access(address, sizeof(T), true, true, code);
  std::atomic_ref<T> cell(*address);
  T old = cell.load(std::memory_order_relaxed);
  while (!cell.compare_exchange_weak(old, op(old, value), std::memory_order_relaxed)) {
  }
  return old;
}
const auto sum = [](auto x, auto y) { return x + y; };
const auto lower = [](auto x, auto y) { return y < x ? y : x; };
}  // namespace

float atomic_add(float* a, float v) { return read_modify_write(a, v, sum, __builtin_return_address(0)); }
double atomic_add(double* a, double v) { return read_modify_write(a, v, sum, __builtin_return_address(0)); }
int atomic_add(int* a, int v) { return read_modify_write(a, v, sum, __builtin_return_address(0)); }
unsigned atomic_add(unsigned* a, unsigned v) { return read_modify_write(a, v, sum, __builtin_return_address(0)); }
int atomic_min(int* a, int v) { return read_modify_write(a, v, lower, __builtin_return_address(0)); }
long long atomic_min(long long* a, long long v) { return read_modify_write(a, v, lower, __builtin_return_address(0)); }

}  // namespace cudasim

// --- the hooks clang's -fsanitize-coverage=inline-8bit-counters,trace-loads,trace-stores calls ---------------
#if defined(CUDASIM_CHECK)
extern "C" {
// The coverage mode trace-loads/stores needs; its counters are not used.
void __sanitizer_cov_8bit_counters_init(char*, char*) {}
#define CUDASIM_HOOK(n)                                                                                       \
  void __sanitizer_cov_load##n(void* p) { cudasim::access(p, n, false, false, __builtin_return_address(0)); } \
  void __sanitizer_cov_store##n(void* p) { cudasim::access(p, n, true, false, __builtin_return_address(0)); }
CUDASIM_HOOK(1)
CUDASIM_HOOK(2)
CUDASIM_HOOK(4)
CUDASIM_HOOK(8)
CUDASIM_HOOK(16)
#undef CUDASIM_HOOK
}
#endif
