#pragma once
// The CPU's arithmetic ceiling, the denominator of model FLOPs utilisation (MFU; transformer/flops.h
// counts the numerator). A CPU's peak depends on its vector width, FMA units and clock under load, none of
// which a program can read reliably, so it is measured: the CPU backend's fastest float32 GEMM micro-kernel
// on panels that stay in L1, on `threads` cores at once (all cores busy lowers the clock, as in training).
// kernel_bench prints the same ceiling for one core. Takes about 0.1 s the first time for each
// thread count; later calls return that first measurement. The one header of the CPU backend that code above the
// Backend interface may include (a benchmark's denominator, not a kernel), which is why it lives here.
namespace stepformer::cpu {

double peak_flops(int threads);  // float32 FLOP/s; threads <= 0: OpenMP's default count
// bfloat16 FLOP/s: twice the float32 peak on a CPU with AVX512_BF16 (vdpbf16ps does two multiply-adds per
// float32 lane), the float32 peak itself on one without (no instruction multiplies bfloat16 faster there).
double bf16_peak_flops(int threads);
bool has_avx512_bf16();

}  // namespace stepformer::cpu
