// Which GEMM micro-kernels this CPU runs: the float32 and float64 ones by instruction set (gemm_kernels), and the
// bfloat16 dot-product ones (bf16_dots), asked of the CPU once per process. gemm.cpp's loops call what they return.
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "gemm.h"
#include "gemm_isa.h"
#include "gemm_microkernel.h"

namespace stepformer::cpu {

namespace {

// The portable micro-kernel: plain C++ that any compiler vectorises as it can.
template <class Scalar>
struct Portable {
  using T = Scalar;
  using Reg = Scalar;
  static constexpr int kLanes = 1;
  static Reg zero() { return 0; }
  static Reg load(const T* p) { return *p; }
  static void store(T* p, Reg r) { *p = r; }
  static Reg broadcast(T x) { return x; }
  static Reg fma(Reg a, Reg b, Reg c) { return a * b + c; }
  static Reg mul(Reg a, Reg b) { return a * b; }
};

template <class T>
GemmKernel<T> blocked(const gemm_detail::MicroKernel<T>& k, std::int64_t mc, std::int64_t kc, std::int64_t nc) {
  return {k.name, k.mr, k.nr, mc, kc, nc, k.run, k.run_rows, k.pack_a, k.pack_b};
}

template <class T>
std::vector<GemmKernel<T>> detect() {
  std::vector<GemmKernel<T>> out;
  out.push_back(blocked<T>({"portable", 4, 8, &gemm_detail::micro_kernel<Portable<T>, 4, 8>,
                            &gemm_detail::micro_kernel_rows<Portable<T>, 4, 8>},
                           128, 256, 4096));
#if defined(__x86_64__)  // elsewhere (WebAssembly) the portable kernel alone
  constexpr bool f32 = std::is_same_v<T, float>;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    if constexpr (f32)
      out.push_back(blocked(gemm_detail::avx2_f32(), 144, 256, 4096));
    else
      out.push_back(blocked(gemm_detail::avx2_f64(), 144, 256, 4096));
  }
  if (__builtin_cpu_supports("avx512f")) {
    if constexpr (f32)
      out.push_back(blocked(gemm_detail::avx512_f32(), 98, 1024, 2048));
    else
      out.push_back(blocked(gemm_detail::avx512_f64(), 144, 256, 2048));
  }
#endif
  return out;
}

}  // namespace

template <class T>
const std::vector<GemmKernel<T>>& gemm_kernels() {
  static const std::vector<GemmKernel<T>> kernels = detect<T>();
  return kernels;
}

// The bfloat16 dot-product kernels this CPU can run, fastest last: vdpbf16ps where the CPU has AVX512_BF16, then
// AMX where it also has AMX-TILE and AMX-BF16 and Linux grants the tile state (CPUID leaf 7: EDX bits 24 and
// 22). STEPFORMER_NO_BF16_DOT leaves out both (benchmarks time the widened fallback with it), STEPFORMER_NO_AMX
// the second. Each kernel's file may use AVX-512 anywhere: it is only called on such a CPU.
const std::vector<gemm_detail::MicroKernelBf16>& gemm_detail::bf16_dots() {
  static const std::vector<gemm_detail::MicroKernelBf16> kernels = [] {
    std::vector<gemm_detail::MicroKernelBf16> out;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || std::getenv("STEPFORMER_NO_BF16_DOT"))
      return out;
    out.push_back(gemm_detail::avx512_bf16());
    unsigned eax, ebx, ecx, edx;
    const bool amx = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx >> 24 & 1) && (edx >> 22 & 1);
    if (amx && !std::getenv("STEPFORMER_NO_AMX") && gemm_detail::amx_granted()) out.push_back(gemm_detail::amx_bf16());
#endif
    return out;
  }();
  return kernels;
}

const gemm_detail::MicroKernelBf16* gemm_detail::bf16_dot(const char* name) {
  const auto& kernels = bf16_dots();
  if (!name) return kernels.empty() ? nullptr : &kernels.back();
  for (const auto& k : kernels)
    if (std::string_view(k.name) == name) return &k;
  throw std::invalid_argument(std::string("cpu gemm: no bfloat16 kernel '") + name + "' on this CPU");
}

const char* bf16_dot_kernel() { return gemm_detail::bf16_dot() ? gemm_detail::bf16_dot()->name : nullptr; }

std::vector<std::string> bf16_dot_kernels() {
  std::vector<std::string> names;
  for (const auto& k : gemm_detail::bf16_dots()) names.emplace_back(k.name);
  return names;
}

template const std::vector<GemmKernel<float>>& gemm_kernels<float>();
template const std::vector<GemmKernel<double>>& gemm_kernels<double>();

}  // namespace stepformer::cpu
