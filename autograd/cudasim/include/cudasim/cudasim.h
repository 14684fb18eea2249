#pragma once
// cuda-sim: the CUDA execution model on a CPU, so that our .cu kernels run (and can be stepped through in
// gdb) on a machine without a GPU. Read docs: ../../../shared/design/cuda-sim.md has the measured design.
//
// - CUDA threads run on fibers (own stacks; cuda-sim's own switch, src/fiber.h, a few nanoseconds). The blocks
//   of a grid run one after another on the calling OS thread, or on several at once for a grid of 2 or more
//   blocks and at least 512 threads (set_os_threads below; one in the checking build and under a random
//   schedule). Within a block a fiber runs threads one after another as plain calls until one must wait (a
//   barrier, a warp collective): that thread keeps the fiber and switches straight to the next ready thread,
//   on a new fiber if it has not started.
// - __syncthreads() is a counting barrier: a thread that arrives waits (yields) until every live thread of
//   the block has arrived; threads that returned count as arrived. If every live thread waits and none can
//   go on, cuda-sim aborts with "deadlock" and says who waits where.
// - Warp collectives (__shfl_*_sync, __ballot_sync, __syncwarp, the tensor cores' mma.sync and ldmatrix) meet
//   per warp of 32 threads and follow PTX's lane rules (width segments, clamping for up/down). A lane outside
//   the mask it passes, or lanes disagreeing on the mask, abort; reading an absent lane (past the end of a
//   partial warp) returns poison: all bits set, NaN for float.
// - __shared__ variables are static thread_local (one block runs at a time on each OS thread); dynamic
//   shared memory (CUDASIM_DYNAMIC_SHARED) is a buffer filled with 0xFF at every block start, so a read
//   before any write shows up as NaN.
// - Atomics are atomic read-modify-writes (blocks on different OS threads may meet).
// - The schedule (set_schedule, or STEPFORMER_CUDASIM_SCHEDULE=forward|reverse|random:SEED) says in which
//   order a block's threads start and are released from barriers and warp collectives: first to last, last
//   to first, or a seeded random order at every such point. A kernel that silently depends on the order (a
//   missing __syncthreads) then gives other results; cudasim/check.h finds such races by name.
// - Device memory (device_allocate) is filled with 0xFF: a read before any write is NaN.
// There is no real concurrency, and floating point is the CPU's (no FMA contraction as nvcc does).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace cudasim {

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};

// The running CUDA thread's coordinates (valid inside a kernel only). Read once per use of threadIdx &
// co., so inline: the scheduler keeps `running` up to date at every switch.
namespace detail {
struct Running {
  const uint3* thread_idx = nullptr;  // null outside a kernel
  uint3 block_idx;
  dim3 block_dim, grid_dim;
};
extern thread_local constinit Running running;
[[noreturn]] void outside_kernel(const char* what);
}  // namespace detail
inline const uint3& thread_idx() {
  if (!detail::running.thread_idx) detail::outside_kernel("threadIdx");
  return *detail::running.thread_idx;
}
inline const uint3& block_idx() {
  if (!detail::running.thread_idx) detail::outside_kernel("blockIdx");
  return detail::running.block_idx;
}
inline const dim3& block_dim() {
  if (!detail::running.thread_idx) detail::outside_kernel("blockDim");
  return detail::running.block_dim;
}
inline const dim3& grid_dim() {
  if (!detail::running.thread_idx) detail::outside_kernel("gridDim");
  return detail::running.grid_dim;
}

// Runs `body` once per CUDA thread of the grid, with dynamic shared memory of `shared_bytes`. `kernel` (may be
// null) names the launch in reports.
void run_grid(const void* kernel, dim3 grid, dim3 block, std::size_t shared_bytes, const std::function<void()>& body);
void* dynamic_shared();

enum class Schedule { forward, reverse, random };
void set_schedule(Schedule schedule, std::uint64_t seed = 0);
Schedule schedule();

// The most OS threads that run one grid's blocks at once (a grid of at least 256 CUDA threads per OS thread;
// forward and reverse schedules; the plain build): n, or with 0 STEPFORMER_CUDASIM_THREADS or else the cores.
void set_os_threads(unsigned n);
unsigned os_threads();

// Device memory as cudaMalloc / cudaFree / cudaMemcpy would give it (in the checking build: from an arena
// where every allocation is tracked and freed memory is never reused).
void* device_allocate(std::size_t bytes);
void device_free(void* ptr);
void copy_to_device(void* dst, const void* host_src, std::size_t bytes);

// Barriers and warp collectives know their call site in the source (synccheck compares them): the CUDA
// spellings below pass __builtin_FILE() and __builtin_LINE() of their caller.
struct Site {
  const char* file = nullptr;
  unsigned line = 0;
};

void syncthreads(Site site);

// Warp collectives on raw 64-bit values; the typed __shfl_* templates below convert.
enum class Shuffle { idx, up, down, bfly };
std::uint64_t shuffle(unsigned mask, std::uint64_t value, Shuffle mode, int lane_or_delta, int width, Site site);
unsigned ballot(unsigned mask, bool predicate, Site site);
void syncwarp(unsigned mask, Site site);
// PTX's mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (d += a b for a warp's 16 x 8 tile of d, over 16
// of k), a warp-wide instruction: every lane of the warp passes its fragments (the PTX ISA's layout, in
// compat.cuh) and meets the others once; the last to arrive computes all 128 sums, each in float32 over k in
// order (the products of two bfloat16 values are exact in float32; the tensor cores' order is unspecified).
void mma_m16n8k16_bf16(float d[4], const std::uint32_t a[4], const std::uint32_t b[2], Site site);
// PTX's ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16, a warp-wide instruction: every lane has loaded the 16
// bytes at the address it gives (`row`, 8 16-bit values: its own load, so the checker sees it) and meets the
// others once; lane 4r + w leaves with word w of row r of each of the 4 matrices (lanes 8q..8q+7 gave matrix
// q's rows), or with .trans (`trans`) the same of each transposed matrix. The layout is written out in src/mma.h.
void ldmatrix_x4(std::uint32_t d[4], const std::uint32_t row[4], bool trans, Site site);

// While one lives, the profiler does not count this OS thread's accesses (the checks still see them): the poison
// AsyncCopies writes, which no GPU instruction does.
struct NotCounted {
  NotCounted();
  ~NotCounted();
  NotCounted(const NotCounted&) = delete;
  NotCounted& operator=(const NotCounted&) = delete;
};

// 16 bytes as one vector: loaded and stored by one instruction each, so the checker's hooks see one 16-byte access
// where a struct's copy may become four word accesses (or a memcpy they do not see at all).
typedef std::uint32_t Words16 __attribute__((vector_size(16)));

// PTX's cp.async (cp.async.cg.shared.global with its zero fill, commit_group, wait_group), emulated in kernel code,
// so memcheck, racecheck, initcheck and the profiler see every byte it moves: copy16 starts moving 16 bytes from
// global to shared memory (16 zero bytes when `fill` is false, and nothing is read), commit closes the group of
// copies started since the last one, wait<N>() returns once all but the N newest groups have landed. A GPU may
// land the bytes at any moment from the copy to the wait: copy16 fills the destination with 0xFF at once (a read
// before the wait is a NaN, and racecheck sees a write where the copy starts), and the wait moves the bytes, the
// latest moment a GPU may. One object per CUDA thread (a local of the kernel), up to kCapacity copies in flight.
template <int kCapacity>
class AsyncCopies {
 public:
  void copy16(void* shared_dst, const void* global_src, bool fill) {
    if (count_ == kCapacity) overflow("copies in flight");
    Words16* dst = static_cast<Words16*>(shared_dst);
    {
      const NotCounted poison;  // one cp.async, one shared store in the counts: the bytes' at the wait
      *dst = Words16{~0u, ~0u, ~0u, ~0u};
    }
    copies_[count_++] = {dst, fill ? static_cast<const Words16*>(global_src) : nullptr};
  }
  void commit() {
    if (groups_ == kCapacity) overflow("groups in flight");
    ends_[groups_++] = count_;
  }
  template <int kPending>
  void wait() {
    if (groups_ <= kPending) return;
    const int landed = ends_[groups_ - kPending - 1];  // the copies of the older groups
    for (int i = 0; i < landed; ++i) *copies_[i].dst = copies_[i].src ? *copies_[i].src : Words16{};
    for (int i = landed; i < count_; ++i) copies_[i - landed] = copies_[i];
    for (int g = 0; g < kPending; ++g) ends_[g] = ends_[groups_ - kPending + g] - landed;
    count_ -= landed, groups_ = kPending;
  }

 private:
  struct Copy {
    Words16* dst;
    const Words16* src;  // null: zeros
  };
  [[noreturn]] static void overflow(const char* what) {
    throw std::length_error("cuda-sim: more than " + std::to_string(kCapacity) + " cp.async " + what +
                            " in one thread (AsyncCopies' capacity)");
  }
  Copy copies_[kCapacity];
  int ends_[kCapacity];  // per committed group, how many copies end with it
  int count_ = 0, groups_ = 0;
};

template <class T>
T shuffle_typed(unsigned mask, T value, Shuffle mode, int arg, int width, Site site) {
  static_assert(sizeof(T) <= 8, "cuda-sim shuffles values of at most 8 bytes");
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = shuffle(mask, bits, mode, arg, width, site);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

// One way to launch, for both compilers: under nvcc the compat header turns it into kernel<<<...>>>.
// Atomics: real ones (blocks may run on several OS threads). They live out of line, where the checker's access
// hooks do not see them as plain loads and stores (atomics are not races).
float atomic_add(float* address, float value);
double atomic_add(double* address, double value);
int atomic_add(int* address, int value);
unsigned atomic_add(unsigned* address, unsigned value);
int atomic_min(int* address, int value);
long long atomic_min(long long* address, long long value);

// One way to launch, for both compilers: under nvcc the compat header turns it into kernel<<<...>>>.
template <class Kernel, class... Args>
void launch(Kernel kernel, dim3 grid, dim3 block, std::size_t shared_bytes, Args... args) {
  const void* name = nullptr;
  if constexpr (std::is_pointer_v<Kernel>) name = reinterpret_cast<const void*>(kernel);
  run_grid(name, grid, block, shared_bytes, [&] { kernel(args...); });
}

}  // namespace cudasim

// --- the CUDA spellings ---------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#if defined(CUDASIM_CHECK)
// The checker must know shared memory's addresses: one section, named. Each variable comes with a 64-byte gap
// declared just before it (compilers lay a function's statics out in order or in reverse, so a gap sits between
// any two variables): memcheck reports an access to a gap or to alignment padding as out of bounds, where it
// would otherwise land in the next array unseen.
#define CUDASIM_CONCAT_(a, b) a##b
#define CUDASIM_CONCAT(a, b) CUDASIM_CONCAT_(a, b)
#define __shared__                                                                                              \
  static __attribute__((section("cudasim_shared"), used, aligned(64))) char CUDASIM_CONCAT(cudasim_shared_gap_, \
                                                                                           __COUNTER__)[64];    \
  static __attribute__((section("cudasim_shared"), aligned(64)))
#else
#define __shared__ static thread_local
#endif
#define threadIdx (::cudasim::thread_idx())
#define blockIdx (::cudasim::block_idx())
#define blockDim (::cudasim::block_dim())
#define gridDim (::cudasim::grid_dim())
#define CUDASIM_DYNAMIC_SHARED(T, name) T* name = static_cast<T*>(::cudasim::dynamic_shared())

#define CUDASIM_CALLER \
  const char *file_ = __builtin_FILE(), unsigned line_ = __builtin_LINE()  // the call site, for synccheck
inline void __syncthreads(CUDASIM_CALLER) { cudasim::syncthreads({file_, line_}); }
inline void __syncwarp(unsigned mask = 0xffffffffu, CUDASIM_CALLER) { cudasim::syncwarp(mask, {file_, line_}); }
inline unsigned __ballot_sync(unsigned mask, int predicate, CUDASIM_CALLER) {
  return cudasim::ballot(mask, predicate != 0, {file_, line_});
}
template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32, CUDASIM_CALLER) {
  return cudasim::shuffle_typed(mask, var, cudasim::Shuffle::idx, src_lane, width, {file_, line_});
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32, CUDASIM_CALLER) {
  return cudasim::shuffle_typed(mask, var, cudasim::Shuffle::up, static_cast<int>(delta), width, {file_, line_});
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32, CUDASIM_CALLER) {
  return cudasim::shuffle_typed(mask, var, cudasim::Shuffle::down, static_cast<int>(delta), width, {file_, line_});
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32, CUDASIM_CALLER) {
  return cudasim::shuffle_typed(mask, var, cudasim::Shuffle::bfly, lane_mask, width, {file_, line_});
}
#undef CUDASIM_CALLER
template <class T>
T atomicAdd(T* address, T value) {
  return cudasim::atomic_add(address, value);
}
template <class T>
T atomicMin(T* address, T value) {
  return cudasim::atomic_min(address, value);
}
