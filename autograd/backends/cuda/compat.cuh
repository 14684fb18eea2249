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
