#pragma once
// One source, two compilers. The kernels in this folder are compiled
//  - by nvcc into the `cuda` device (a real GPU): CUDA's own headers, `launch` is kernel<<<...>>>;
//  - by g++ into the `cuda-sim` device: autograd/cudasim emulates the CUDA execution model on the CPU.
// Kernel files write CUDA and never `<<< >>>`; the few spellings that differ are defined here.
// The same kernels exist twice in one library, so everything lives in namespace stepformer::<device>
// (STEPFORMER_CUDA_NS is `cuda` or `cuda_sim`, set by CMake).
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "../elementwise_math.h"
#include "autograd/errors.h"

namespace stepformer::STEPFORMER_CUDA_NS {
// Every launch through `launch` below, on a GPU and on cuda-sim alike (Backend::kernel_launches).
inline std::atomic<std::size_t> launches{0};
}  // namespace stepformer::STEPFORMER_CUDA_NS

#if defined(__CUDACC__)
#include <cuda_runtime.h>

// Every runtime call is checked; the error names the call's file and line.
#define STEPFORMER_CUDA_CHECK(call)                                                                            \
  do {                                                                                                         \
    const cudaError_t err_ = (call);                                                                           \
    if (err_ != cudaSuccess)                                                                                   \
      throw ::stepformer::DeviceError(std::string("cuda: ") + cudaGetErrorString(err_) + " at " __FILE__ ":" + \
                                      std::to_string(__LINE__) + " (" #call ")");                              \
  } while (0)

namespace stepformer::STEPFORMER_CUDA_NS {
// The stream launches go to: the legacy default stream (0), or while a graph is recorded the stream being captured
// (memory.cu's begin_graph; the default stream cannot be captured).
inline cudaStream_t launch_stream = nullptr;
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes, Args... args) {
  if (launch_stream == nullptr) ++launches;  // a captured kernel is queued by the graph's replay (one launch)
  kernel<<<grid, block, shared_bytes, launch_stream>>>(args...);
  STEPFORMER_CUDA_CHECK(cudaGetLastError());
}
// The next launch's floating-point operations, for cuda-sim's profiler (a GPU profiler counts them itself).
inline void next_launch_flops(std::uint64_t) {}

// d += a b on the tensor cores: a warp's 16 x 8 tile of d over 16 of k, bfloat16 operands, float32 sums (PTX
// ISA, "Warp-level matrix multiply-accumulate instructions", mma.sync m16n8k16; the fragments' layout is written
// out in autograd/cudasim/src/mma.h). Needs compute capability 8.0 (A100) or newer.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const std::uint32_t (&a)[4],
                                                  const std::uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();  // never launched: has_bf16_tensor_cores() is false there
#endif
}
// A warp loads four 8 x 8 matrices of 16-bit values from shared memory straight into mma.sync's fragments (PTX
// ISA, "Warp-level matrix load instruction: ldmatrix"): lane 8q + r gives `row`, the address of row r of matrix q
// (16 bytes, 16-byte aligned), and lane 4r + w receives word w of row r of matrix q in d[q]; with `trans`, that of
// the transposed matrix. The layout is written out in autograd/cudasim/src/mma.h.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&d)[4], const void* row, bool trans) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if (trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(address)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(address)
                 : "memory");
#else
  __trap();  // never launched: has_bf16_tensor_cores() is false there
#endif
}

// A thread's asynchronous copies from global to shared memory (PTX ISA, "cp.async"): copy16 starts moving 16
// bytes (16-byte aligned at both ends; zeros when `fill` is false, and then nothing is read), commit closes the
// group of copies started since the last commit, wait<N>() returns once all but the N newest groups have landed.
// The bytes are visible to this thread after the wait and to the block after a __syncthreads that follows it.
template <int kCapacity>
class AsyncCopies {
 public:
  __device__ __forceinline__ void copy16(void* shared_dst, const void* global_src, bool fill) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared_dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global_src), "r"(fill ? 16 : 0)
                 : "memory");
#else
    __trap();
#endif
  }
  __device__ __forceinline__ void commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
  }
  template <int kPending>
  __device__ __forceinline__ void wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
  }
};

// Hopper's warpgroup matrix multiply (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
// Instructions": wgmma.mma_async, compute capability 9.0 with sm_90a code). The 4 warps of a warpgroup (128
// threads, the first warp's index a multiple of 4) issue one instruction together: d += a b for a 64 x 128 tile of
// d over 16 of k, a and b read by the tensor cores straight from shared memory through descriptors
// (wgmma_descriptor below), d in registers, in mma.sync's fragment layout per warp: warp w holds rows 16w..16w+15,
// d[4j..4j+3] the fragment of columns 8j..8j+7 (autograd/cudasim/src/mma.h). The instruction is asynchronous:
// fence() before the first one that reads registers written since, commit() closes the group of those issued since
// the last, wait<N>() returns once all but the N newest groups are done; d must not be touched, nor its operands'
// shared memory overwritten, before then. kTransA, kTransB: the operand lies along its rows (m of a, n of b) rather
// than along k (the instruction's imm-trans-a, imm-trans-b).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define STEPFORMER_WGMMA_CODE 1
#endif
template <int kCapacity>
class WarpgroupMma {
 public:
  __device__ __forceinline__ void fence() {
#if defined(STEPFORMER_WGMMA_CODE)
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
  }
  template <bool kTransA, bool kTransB>
  __device__ __forceinline__ void mma_m64n128k16(float (&d)[64], std::uint64_t a, std::uint64_t b) {
#if defined(STEPFORMER_WGMMA_CODE)
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, 1, 1, 1, %66, %67;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
          "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
          "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(a), "l"(b), "n"(int{kTransA}), "n"(int{kTransB}));
#else
    __trap();  // never launched: wgmma_available() is false without sm_90a code
#endif
  }
  __device__ __forceinline__ void commit() {
#if defined(STEPFORMER_WGMMA_CODE)
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
  }
  template <int kPending>
  __device__ __forceinline__ void wait() {
#if defined(STEPFORMER_WGMMA_CODE)
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
  }
};
// Keeps the compiler from moving reads or writes of d across a wgmma's fence or wait (registers the asm above
// names as its operands, whose results land only at the wait).
__device__ __forceinline__ void fence_operands(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Orders this thread's writes to shared memory (stores, landed cp.async) before the tensor cores' reads of it that
// follow a barrier (PTX ISA, "Proxies": wgmma reads through the async proxy).
__device__ __forceinline__ void fence_async_shared() {
#if defined(STEPFORMER_WGMMA_CODE)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// A shared address as the shared window counts it (a descriptor's start address).
__device__ __forceinline__ std::uint32_t shared_window(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
// Whether v6 can run here: a compute capability 9.0 GPU, and the library built with sm_90a code
// (CMAKE_CUDA_ARCHITECTURES holding 90a; CMake defines STEPFORMER_CUDA_SM90A then).
inline bool wgmma_available() {
#if defined(STEPFORMER_CUDA_SM90A)
  int device = 0, major = 0, minor = 0;
  STEPFORMER_CUDA_CHECK(cudaGetDevice(&device));
  STEPFORMER_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  STEPFORMER_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major == 9 && minor == 0;
#else
  return false;
#endif
}

inline bool has_bf16_tensor_cores() {
  int device = 0, major = 0;
  STEPFORMER_CUDA_CHECK(cudaGetDevice(&device));
  STEPFORMER_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 8;
}
}  // namespace stepformer::STEPFORMER_CUDA_NS

// The launch's dynamic shared memory (its shared_bytes) as a T*: one untyped buffer, since kernels of different
// T share it, aligned for any of them.
#define CUDASIM_DYNAMIC_SHARED(T, name)                                       \
  extern __shared__ __align__(16) unsigned char stepformer_dynamic_shared_[]; \
  T* name = reinterpret_cast<T*>(stepformer_dynamic_shared_)

#else
#include <math.h>

#include <functional>
#include <vector>

#include "cudasim/cudasim.h"
#include "cudasim/profile.h"

namespace stepformer::STEPFORMER_CUDA_NS {
using cudasim::dim3;
using cudasim::profile::next_launch_flops;
// While a graph is recorded (memory.cu's begin_graph), its list of launches: each launch is kept there, with copies
// of its arguments, instead of run.
inline std::vector<std::function<void()>>* recording = nullptr;
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes, Args... args) {
  if (recording) {  // queued by the graph's replay (one launch); the profiler's FLOPs are not kept for it
    next_launch_flops(0);
    recording->push_back([=] { cudasim::launch(kernel, grid, block, shared_bytes, static_cast<Params>(args)...); });
    return;
  }
  ++launches;
  cudasim::launch(kernel, grid, block, shared_bytes, static_cast<Params>(args)...);
}
// The tensor cores' mma.sync, emulated: one meeting of the warp (cudasim.h).
inline void mma_m16n8k16_bf16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
                              const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
  cudasim::mma_m16n8k16_bf16(d, a, b, {file, line});
}
// ldmatrix, emulated: each lane loads its own row (kernel code, so the checker and the profiler see a 16-byte
// shared load per lane, as the instruction makes), then the warp meets once to hand out the fragments.
inline void ldmatrix_x4(std::uint32_t (&d)[4], const void* row, bool trans, const char* file = __builtin_FILE(),
                        unsigned line = __builtin_LINE()) {
  const cudasim::Words16 mine = *static_cast<const cudasim::Words16*>(row);
  const std::uint32_t words[4] = {mine[0], mine[1], mine[2], mine[3]};
  cudasim::ldmatrix_x4(d, words, trans, {file, line});
}

// cp.async, emulated in kernel code (cudasim.h).
template <int kCapacity>
using AsyncCopies = cudasim::AsyncCopies<kCapacity>;

// wgmma, emulated in kernel code (the instruction's contract is written out in the nvcc branch above): mma_m64n128k16
// only queues the product; wait<N>() runs the queued products of all but the N newest groups, the latest moment a
// GPU may, so a kernel that overwrites an operand's shared memory, or reads d, before the wait gets other numbers
// (NaN where a cp.async has begun to overwrite it). Each product reads its operands through the descriptors
// (wgmma_descriptor: no swizzle, the core matrices of 8 rows of 16 bytes, LBO between neighbours along k, SBO along
// m or n), each lane the values its fragments hold, and the warp meets at 16 emulated mma.sync, one per 8 columns
// of d. The checks see those reads (a race with the copies that fill the tile, a read past it); the profiler does
// not count them, since on a GPU the tensor cores read shared memory and no load instruction of the warp's does.
// The 4 warps of the warpgroup do not meet: each warp's rows of d depend only on its own rows of a.
template <int kCapacity>
class WarpgroupMma {
 public:
  void fence() {}
  template <bool kTransA, bool kTransB>
  void mma_m64n128k16(float (&d)[64], std::uint64_t a, std::uint64_t b) {
    if (count_ == kCapacity) overflow("products in flight");
    ops_[count_++] = {d, a, b, kTransA, kTransB};
  }
  void commit() {
    if (groups_ == kCapacity) overflow("groups in flight");
    ends_[groups_++] = count_;
  }
  template <int kPending>
  void wait(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) {
    if (groups_ <= kPending) return;
    const int done = ends_[groups_ - kPending - 1];  // the products of the older groups
    for (int i = 0; i < done; ++i) multiply(ops_[i], {file, line});
    for (int i = done; i < count_; ++i) ops_[i - done] = ops_[i];
    for (int g = 0; g < kPending; ++g) ends_[g] = ends_[groups_ - kPending + g] - done;
    count_ -= done, groups_ = kPending;
  }

 private:
  struct Op {
    float* d;
    std::uint64_t a, b;
    bool trans_a, trans_b;
  };
  // The 16-bit value (r, k) of the operand a descriptor describes, from this launch's dynamic shared memory.
  static std::uint32_t value(std::uint64_t desc, int r, int k, bool along_rows) {
    const std::uint64_t start = (desc & 0x3FFFu) << 4, lbo = (desc >> 16 & 0x3FFFu) << 4,
                        sbo = (desc >> 32 & 0x3FFFu) << 4;
    const std::uint64_t in_core = along_rows ? (k % 8) * 16 + (r % 8) * 2 : (r % 8) * 16 + (k % 8) * 2;
    const std::uint64_t offset =
        start + static_cast<std::uint64_t>(r / 8) * sbo + static_cast<std::uint64_t>(k / 8) * lbo;
    return *reinterpret_cast<const std::uint16_t*>(static_cast<const char*>(cudasim::dynamic_shared()) + offset +
                                                   in_core);
  }
  // Values (r, k) and (r, k + 1) as one fragment word, the lower k in the low half.
  static std::uint32_t pair(std::uint64_t desc, int r, int k, bool along_rows) {
    return value(desc, r, k, along_rows) | value(desc, r, k + 1, along_rows) << 16;
  }
  static void multiply(const Op& op, cudasim::Site site) {
    const int lane = static_cast<int>(threadIdx.x) % 32, rows = static_cast<int>(threadIdx.x) / 32 % 4 * 16;
    const int g = lane / 4, t = lane % 4;
    std::uint32_t a[4], b[16][2];
    {
      const cudasim::NotCounted tensor_cores;  // no load instruction of the warp's (the checks see the reads)
      for (int i = 0; i < 4; ++i) a[i] = pair(op.a, rows + g + 8 * (i % 2), 2 * t + 8 * (i / 2), op.trans_a);
      for (int j = 0; j < 16; ++j)
        for (int i = 0; i < 2; ++i) b[j][i] = pair(op.b, 8 * j + g, 2 * t + 8 * i, op.trans_b);
    }
    for (int j = 0; j < 16; ++j) cudasim::mma_m16n8k16_bf16(op.d + 4 * j, a, b[j], site);
  }
  [[noreturn]] static void overflow(const char* what) {
    throw std::length_error("cuda-sim: more than " + std::to_string(kCapacity) + " wgmma " + what +
                            " in one thread (WarpgroupMma's capacity)");
  }
  Op ops_[kCapacity];
  int ends_[kCapacity];
  int count_ = 0, groups_ = 0;
};
inline void fence_operands(float (&)[64]) {}
inline void fence_async_shared() {}
// A shared address as the shared window counts it: from the start of the launch's dynamic shared memory.
inline std::uint32_t shared_window(const void* p) {
  return static_cast<std::uint32_t>(static_cast<const char*>(p) - static_cast<const char*>(cudasim::dynamic_shared()));
}
inline bool wgmma_available() { return true; }
inline bool has_bf16_tensor_cores() { return true; }
}  // namespace stepformer::STEPFORMER_CUDA_NS
#endif

// A loop over a fixed count unrolled by nvcc, so that arrays indexed by its counter (a GEMM's sums) stay in registers
// rather than in local memory; nothing under g++ (cuda-sim runs the loop as written).
#if defined(__CUDACC__)
#define STEPFORMER_UNROLL _Pragma("unroll")
#else
#define STEPFORMER_UNROLL
#endif

namespace stepformer::STEPFORMER_CUDA_NS {

// A wgmma shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format") for the layout without swizzling:
// the operand in core matrices of 8 rows of 16 bytes each (8 values of k of one row, or along its rows 8 rows at
// one k), 128 contiguous bytes; lbo bytes from one core matrix to the next along k, sbo bytes along m or n. Bits
// 0-13 the start address, 16-29 lbo, 32-45 sbo, each in units of 16 bytes; base offset 0, swizzle mode 0.
__host__ __device__ constexpr std::uint64_t wgmma_descriptor(std::uint32_t shared_address, std::uint32_t lbo,
                                                             std::uint32_t sbo) {
  return (shared_address >> 4 & 0x3FFFu) | std::uint64_t{lbo >> 4 & 0x3FFFu} << 16 |
         std::uint64_t{sbo >> 4 & 0x3FFFu} << 32;
}

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;

// 16 bytes moved by one load and one store: ld/st.v4 under nvcc, one access the checker sees under cuda-sim (where a
// struct's copy may become a memcpy it does not see).
#if defined(__CUDACC__)
using Bytes16 = uint4;
#else
using Bytes16 = cudasim::Words16;
#endif

// Device math for T = float or double (exp_, log_, ...) is stepformer's, in ../elementwise_math.h.

// Blocks for n elements at `threads` per block, capped: kernels loop with a grid stride past the cap.
inline unsigned blocks_for(std::int64_t n, unsigned threads, std::int64_t cap = 4096) {
  const std::int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > cap ? cap : b));
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
