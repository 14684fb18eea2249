#pragma once
// The CPU's arithmetic ceiling, the denominator of model FLOPs utilisation (MFU; transformer/flops.h
// counts the numerator). A CPU's peak depends on its vector width, FMA units and clock under load, none of
// which a program can read reliably, so it is measured: the CPU backend's fastest GEMM micro-kernel on panels
// that stay in L1, on `threads` cores at once (all cores busy lowers the clock, as in training).
// kernel_bench prints the same ceiling for one core. Takes about 0.1 s the first time for each
// thread count; later calls return that first measurement. The one header of the CPU backend that code above the
// Backend interface may include (a benchmark's denominator, not a kernel), which is why it lives here.
namespace stepformer::cpu {

double peak_flops(int threads);  // float32 FLOP/s; threads <= 0: OpenMP's default count
// bfloat16 FLOP/s: the same measurement on the bfloat16 kernel the GEMM multiplies with (bf16_peak_kernel()):
// AMX's tiles, or vdpbf16ps, or on a CPU with neither the float32 kernel (no instruction multiplies bfloat16 faster
// there). Measured, not derived: vdpbf16ps does twice a float32 FMA's multiply-adds per instruction, but a Zen 4
// or 5 issues two a cycle and a Sapphire Rapids one every other cycle (docs/performance.md).
double bf16_peak_flops(int threads);
const char* bf16_peak_kernel();  // "amx_bf16", "avx512_bf16" or "float32"

}  // namespace stepformer::cpu
