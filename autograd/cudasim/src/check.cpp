// The kernel checker (cudasim/check.h): device memory, the shadow of every byte kernels touch, the access
// hooks that clang's -fsanitize-coverage=trace-loads,trace-stores calls, and the reports.
//
// Shadow: per byte, the last write and the last two reads from different threads (an Access: launch, block,
// thread, barrier epoch, warp epoch, atomic or not) and when it was last written (initcheck). Two accesses
// race when neither is ordered before the other: same launch, and different blocks (global memory), or same
// block, different threads, same barrier epoch and, within one warp, same __syncwarp epoch.
#include "cudasim/check.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "checker.h"
#include "scheduler.h"
#include "symbols.h"

#if defined(CUDASIM_CHECK)
// The linker's bounds of the section every __shared__ variable lives in (cudasim.h); weak: a program may
// have none.
extern "C" char __start_cudasim_shared[] __attribute__((weak));
extern "C" char __stop_cudasim_shared[] __attribute__((weak));
#endif

namespace cudasim {

namespace detail {
unsigned enabled_checks = 0;
}  // namespace detail

using namespace detail;

namespace {

struct Access {
  std::uint32_t launch = 0, block = 0, epoch = 0;
  std::uint16_t thread = 0, warp_epoch = 0;
  bool atomic = false;
};

struct Cell {
  Access write, read, other_read;                       // other_read: the last reader that is not `read`'s thread
  std::uint32_t written_launch = 0, written_block = 0;  // global: written at all; shared: by this block
};

constexpr std::uint32_t kByHost = 0xffffffffu;

struct Allocation {
  std::size_t bytes = 0;
  bool freed = false;
  bool host_wrote_all = false;  // a copy covered it whole before any shadow existed
  std::vector<Cell> shadow;     // created when a kernel (or a partial copy) first touches it
};

// Device memory of the checking build: one reserved stretch of address space; each allocation gets fresh
// pages and a page of gap after it; freed pages are returned but their addresses never reused, so a use
// after free is always seen as one.
class Arena {
 public:
  static constexpr std::size_t kReserve = std::size_t{1} << 40;
  bool contains(std::uintptr_t a) const { return a - base_ < kReserve; }

  void* allocate(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (base_ == 0) reserve();
    const std::size_t span = round(bytes == 0 ? 1 : bytes);
    if (next_ + span + page_ > kReserve) fail("checking build: the device arena's 1 TiB of addresses is used up");
    char* p = reinterpret_cast<char*>(base_ + next_);
    if (mprotect(p, span, PROT_READ | PROT_WRITE) != 0) fail("checking build: cannot commit device memory");
    next_ += span + page_;
    std::memset(p, 0xFF, span);  // fresh device memory is garbage: NaN
    Allocation& a = table_[reinterpret_cast<std::uintptr_t>(p)];
    a.bytes = bytes;
    return p;
  }

  void free(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = table_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == table_.end() || it->second.freed) fail(fmt::format("device_free({}): not a live device allocation", ptr));
    const std::size_t span = round(it->second.bytes == 0 ? 1 : it->second.bytes);
    madvise(ptr, span, MADV_DONTNEED);
    mprotect(ptr, span, PROT_NONE);  // host code touching it now faults
    it->second.freed = true;
    std::vector<Cell>().swap(it->second.shadow);
  }

  // The allocation whose bytes contain `a`, else null (and `nearest` the closest one, live or freed).
  std::pair<std::uintptr_t, Allocation*> find(std::uintptr_t a, std::pair<std::uintptr_t, Allocation*>* nearest) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = table_.upper_bound(a);
    Allocation* below = nullptr;
    std::uintptr_t below_start = 0;
    if (it != table_.begin()) {
      auto prev = std::prev(it);
      below_start = prev->first, below = &prev->second;
      if (a < below_start + std::max<std::size_t>(below->bytes, 1)) return {below_start, below};
    }
    if (nearest) {
      const bool take_below = below && (it == table_.end() || a - (below_start + below->bytes) < it->first - a);
      *nearest = take_below           ? std::pair{below_start, below}
                 : it != table_.end() ? std::pair{it->first, &it->second}
                                      : std::pair<std::uintptr_t, Allocation*>{0, nullptr};
    }
    return {0, nullptr};
  }

 private:
  std::size_t round(std::size_t bytes) const { return (bytes + page_ - 1) / page_ * page_; }
  void reserve() {
    page_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail("checking build: cannot reserve address space for device memory");
    base_ = reinterpret_cast<std::uintptr_t>(p);
  }

  std::mutex mutex_;
  std::uintptr_t base_ = 0;
  std::size_t next_ = 0, page_ = 4096;
  std::map<std::uintptr_t, Allocation> table_;
};

Arena& arena() {
  static Arena* a = new Arena;  // never destroyed: device memory may be freed during static destruction
  return *a;
}

// --- reports -------------------------------------------------------------------------------------------

check::OnReport on_report = [] {
  const char* env = std::getenv("STEPFORMER_CUDASIM_CHECK_ABORT");
  return env && env[0] == '1' ? check::OnReport::abort : check::OnReport::throw_after_launch;
}();

std::vector<check::Report> kept;         // every report since the last take_reports()
std::vector<check::Report> this_launch;  // the running launch's, deduplicated
// (checker, kind, code address or source file, source line) -> index in this_launch
std::map<std::tuple<std::string, std::string, const void*, unsigned>, std::size_t> seen;
bool trapped = false;  // a memcheck error ended the launch

// Thrown from an access hook: the access must not happen. It ends the launch as a trap ends a grid.
struct Trap : std::exception {
  const char* what() const noexcept override { return "cuda-sim checker: the kernel trapped"; }
};

uint3 coords(std::uint32_t linear, const dim3& extent) {
  return {linear % extent.x, linear / extent.x % extent.y, linear / (extent.x * extent.y)};
}

std::string text(const uint3& u) { return fmt::format("({}, {}, {})", u.x, u.y, u.z); }

std::string kernel_name(const Launch& l) {
  if (l.kernel == nullptr) return "(a lambda)";
  const SymbolName s = symbol_at(l.kernel);
  return s.found ? s.name : fmt::format("{}", l.kernel);
}

void report(const Launch& l, check::Report r, const void* code, unsigned line = 0) {
  auto [it, fresh] = seen.try_emplace({r.checker, r.kind, code, line}, this_launch.size());
  if (!fresh) {
    ++this_launch[it->second].repeats;
    return;
  }
  r.kernel = kernel_name(l);
  const std::string head = fmt::format("{}: {} in kernel {}: ", r.checker, r.kind, r.kernel);
  r.message = head + r.message;
  std::fprintf(stderr, "cuda-sim %s\n", r.message.c_str());
  std::fflush(stderr);
  if (on_report == check::OnReport::abort) std::abort();
  this_launch.push_back(std::move(r));
}

// --- the shadow ----------------------------------------------------------------------------------------

struct Region {
  enum Kind { global, shared_static, shared_dynamic } kind;
  std::uintptr_t start = 0;
  Allocation* allocation = nullptr;
  Cell* cells = nullptr;  // of the region's first byte
};

std::uintptr_t shared_begin = 0;
std::size_t shared_bytes = 0;
std::vector<Cell> shared_cells;   // static __shared__ variables (the cudasim_shared section)
std::vector<Cell> dynamic_cells;  // the launch's dynamic shared memory
std::uintptr_t dynamic_begin = 0;
std::size_t dynamic_bytes = 0;

std::vector<Cell>& shadow_of(Allocation& a) {
  if (a.shadow.empty()) {
    a.shadow.resize(a.bytes);
    if (a.host_wrote_all)
      for (Cell& c : a.shadow) c.written_launch = kByHost;
  }
  return a.shadow;
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
  if (profiling_on && !atomic) {
    const bool shared = a - shared_begin < shared_bytes || a - dynamic_begin < dynamic_bytes;
    if (shared || arena().contains(a)) profile_access(*l, a, size, write, shared, code);
  }
  if (enabled_checks == 0) return;
  Region r{Region::global};
  if (a - shared_begin < shared_bytes) {
    r = {Region::shared_static, shared_begin, nullptr, shared_cells.data()};
  } else if (a - dynamic_begin < dynamic_bytes) {
    r = {Region::shared_dynamic, dynamic_begin, nullptr, dynamic_cells.data()};
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

bool same_site(const Site& a, const Site& b) {
  return a.line == b.line && (a.file == b.file || (a.file && b.file && std::strcmp(a.file, b.file) == 0));
}

// "gemm.cu:94": the file's name without its folders.
std::string source_site(const Site& s) {
  const char* file = s.file ? s.file : "?";
  const char* slash = std::strrchr(file, '/');
  return fmt::format("{}:{}", slash ? slash + 1 : file, s.line);
}

std::string sites_text(const Block& b, int first, int second) {
  const Thread& t = b.threads[static_cast<std::size_t>(first)];
  const Thread& u = b.threads[static_cast<std::size_t>(second)];
  if (u.state == State::done)
    return fmt::format("thread {} waits at the __syncthreads of {}, thread {} exited without reaching it", text(t.idx),
                       source_site(t.site), text(u.idx));
  return fmt::format("thread {} waits at the __syncthreads of {}, thread {} at the one of {}", text(t.idx),
                     source_site(t.site), text(u.idx), source_site(u.site));
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
#endif
  shared_cells.assign(shared_bytes, Cell{});
}

void check_block_begin(Launch& l) {
  dynamic_begin = reinterpret_cast<std::uintptr_t>(l.b->shared.data());
  dynamic_bytes = l.b->shared.size();
  if (dynamic_cells.size() < dynamic_bytes) dynamic_cells.resize(dynamic_bytes);
  if (shared_bytes) std::memset(reinterpret_cast<void*>(shared_begin), 0xFF, shared_bytes);  // poison, as dynamic
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

void check_barrier(const Launch& l, const Block& b, const Thread* arriving) {
  if (profiling_on) profile_barrier(b);
  if (!(enabled_checks & check::sync)) return;
  const int n = static_cast<int>(b.threads.size());
  int first = arriving ? arriving->linear : -1;
  for (int k = 0; k < n && first < 0; ++k)
    if (b.threads[static_cast<std::size_t>(k)].state == State::at_barrier) first = k;
  if (first < 0) return;
  const Site site = b.threads[static_cast<std::size_t>(first)].site;
  for (int k = 0; k < n; ++k) {
    const Thread& t = b.threads[static_cast<std::size_t>(k)];
    const bool waits_here = k == first || (t.state == State::at_barrier && same_site(t.site, site));
    if (waits_here) continue;
    if (t.state != State::at_barrier && t.state != State::done) continue;  // cannot happen: all live ones wait
    check::Report rep;
    rep.checker = "synccheck", rep.kind = "divergent barrier";
    rep.block = rep.other_block = l.block_idx;
    rep.thread = b.threads[static_cast<std::size_t>(first)].idx, rep.other_thread = t.idx, rep.has_other = true;
    rep.location = source_site(site);
    rep.message = fmt::format("block {}: {} (a __syncthreads every thread of the block must reach)", text(l.block_idx),
                              sites_text(b, first, k));
    report(l, std::move(rep), site.file, site.line);
    return;
  }
}

void check_warp(const Launch& l, const Block& b, int warp, unsigned arrived) {
  if (profiling_on) profile_warp_collective();
  if (!(enabled_checks & check::sync)) return;
  int first = -1;
  for (int k = 0; k < 32; ++k) {
    if (!(arrived >> k & 1u)) continue;
    const Thread& t = b.threads[static_cast<std::size_t>(warp * 32 + k)];
    if (first < 0) {
      first = k;
      continue;
    }
    const Thread& f = b.threads[static_cast<std::size_t>(warp * 32 + first)];
    if (same_site(t.site, f.site)) continue;
    check::Report rep;
    rep.checker = "synccheck", rep.kind = "divergent warp collective";
    rep.block = rep.other_block = l.block_idx;
    rep.thread = f.idx, rep.other_thread = t.idx, rep.has_other = true;
    rep.location = source_site(f.site);
    rep.message = fmt::format(
        "block {}, warp {}: lane {} is at the collective of {}, lane {} at the one of {} (the "
        "lanes of one collective must call it at the same place)",
        text(l.block_idx), warp, first, source_site(f.site), k, source_site(t.site));
    report(l, std::move(rep), f.site.file, f.site.line);
    return;
  }
}

}  // namespace detail

// --- device memory ----------------------------------------------------------------------------------------

#if defined(CUDASIM_CHECK)
void* device_allocate(std::size_t bytes) { return arena().allocate(bytes); }
void device_free(void* ptr) {
  if (ptr) arena().free(ptr);
}
void copy_to_device(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  std::memcpy(dst, host_src, bytes);
  const auto a = reinterpret_cast<std::uintptr_t>(dst);
  const auto [start, found] = arena().find(a, nullptr);
  if (found == nullptr || found->freed || a + bytes > start + found->bytes)
    fail(fmt::format("copy_to_device: {} bytes at {} are not inside one live device allocation", bytes, dst));
  if (a == start && bytes == found->bytes && found->shadow.empty()) {
    found->host_wrote_all = true;
    return;
  }
  std::vector<Cell>& cells = shadow_of(*found);
  for (std::size_t k = a - start; k < a - start + bytes; ++k) cells[k].written_launch = kByHost;
}
#else
void* device_allocate(std::size_t bytes) {
  const std::size_t size = (bytes + 255) / 256 * 256;  // cudaMalloc's alignment
  void* p = std::aligned_alloc(256, size == 0 ? 256 : size);
  if (p) std::memset(p, 0xFF, size);  // fresh device memory is garbage: make a read-before-write show up as NaN
  return p;
}
void device_free(void* ptr) { std::free(ptr); }
void copy_to_device(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}
#endif

// --- atomics (out of line: not seen as plain loads and stores) ---------------------------------------------

namespace {
template <class T, class Op>
T read_modify_write(T* address, T value, Op op, const void* code) {
  access(address, sizeof(T), true, true, code);
  const T old = *address;
  *address = op(old, value);
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

// --- the public switches ------------------------------------------------------------------------------------

namespace check {

bool instrumented() {
#if defined(CUDASIM_CHECK)
  return true;
#else
  return false;
#endif
}

void enable(unsigned checks) {
  if (checks != none && !instrumented())
    throw std::logic_error(
        "cuda-sim checks need the checking build (cmake --preset cudasim-check): this build's kernels are not "
        "instrumented, nothing would be seen");
  enabled_checks = checks & all;
}
unsigned enabled() { return enabled_checks; }
void set_on_report(OnReport what) { on_report = what; }
std::vector<Report> take_reports() {
  std::vector<Report> out;
  out.swap(kept);
  return out;
}

}  // namespace check

namespace {
// STEPFORMER_CUDASIM_CHECK=race,mem,init,sync (or all) at start-up.
const bool checks_from_environment = [] {
  const char* env = std::getenv("STEPFORMER_CUDASIM_CHECK");
  if (env == nullptr || *env == '\0') return false;
  unsigned checks = 0;
  std::string list = env;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string word = list.substr(at, comma - at);
    if (word == "race")
      checks |= check::race;
    else if (word == "mem")
      checks |= check::mem;
    else if (word == "init")
      checks |= check::init;
    else if (word == "sync")
      checks |= check::sync;
    else if (word == "all")
      checks |= check::all;
    else
      fail("STEPFORMER_CUDASIM_CHECK=" + list + ": '" + word + "' is not one of race, mem, init, sync, all");
    at = comma + 1;
  }
  if (!check::instrumented())
    fail(
        "STEPFORMER_CUDASIM_CHECK is set, but this build's kernels are not instrumented: build with the "
        "cudasim-check preset (docs/09_cuda.md)");
  enabled_checks = checks;
  return true;
}();
}  // namespace

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
