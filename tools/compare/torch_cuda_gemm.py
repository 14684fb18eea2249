#!/usr/bin/env python3
"""cuBLAS through PyTorch on the shapes of bench/cuda_gemm_bench.cpp: the yardstick for our CUDA GEMMs.

float32 with TF32 off (torch.backends.cuda.matmul.allow_tf32 = False: every product in float32, as our v3)
and bfloat16 operands (cuBLAS's bf16 GEMM on the tensor cores; its product is bfloat16, ours float32, which
changes the bytes written by a few percent at these sizes). Timed with CUDA events, the best of several runs
of enough products to last about 0.1 s. Runs where PyTorch has a GPU (the lent machine: tools/gpu/check.sh):

    python3 tools/compare/torch_cuda_gemm.py [--max N]
"""
import argparse

import torch

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--max", type=int, default=8192)
args = parser.parse_args()
torch.backends.cuda.matmul.allow_tf32 = False
shapes = []
s = 1024
while s <= args.max:
    shapes.append((s, s, s, "square"))
    s *= 2
shapes += [(1024, 2048, 512, "FFN up"), (1024, 512, 2048, "FFN down"), (1024, 512, 512, "projection")]
print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}: cuBLAS GEMM, TFLOP/s (best run)")
print(f"{'M':>6} {'N':>6} {'K':>6} {'':>11} {'float32':>14} {'bfloat16':>15}")
for m, n, k, what in shapes:
    flops = 2.0 * m * n * k
    reps = int(min(max(1e13 / flops, 1), 1000))
    rates = []
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.empty(m, k, device="cuda").uniform_(-1, 1).to(dtype)
        b = torch.empty(k, n, device="cuda").uniform_(-1, 1).to(dtype)
        best = float("inf")
        for run in range(4):  # the first warms up
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                torch.matmul(a, b)
            end.record()
            torch.cuda.synchronize()
            if run:
                best = min(best, start.elapsed_time(end) / 1e3)
        rates.append(flops * reps / best / 1e12)
    print(f"{m:>6} {n:>6} {k:>6} {what:>11} {rates[0]:>14.1f} {rates[1]:>15.1f}")

# One row, c[1, N] = a[1, K] W^T (torch.nn.functional.linear, W [N, K]): the second table of cuda_gemm_bench.
print(f"\nOne row: linear(a[1, K], W[N, K]), us per product, GB/s of W (best run)")
print(f"{'M':>6} {'N':>6} {'K':>6} {'':>11} {'float32':>17} {'bfloat16':>17}")
for m, n, k, what in [(1, 256, 256, "projection"), (1, 688, 256, "FFN up"), (1, 256, 688, "FFN down"),
                      (1, 2000, 256, "logits")]:
    cells = []
    for dtype, size in ((torch.float32, 4), (torch.bfloat16, 2)):
        x = torch.empty(m, k, device="cuda").uniform_(-1, 1).to(dtype)
        w = torch.empty(n, k, device="cuda").uniform_(-1, 1).to(dtype)
        reps = 2000
        best = float("inf")
        for run in range(4):  # the first warms up
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                torch.nn.functional.linear(x, w)
            end.record()
            torch.cuda.synchronize()
            if run:
                best = min(best, start.elapsed_time(end) / 1e3)
        cells.append(f"{best / reps * 1e6:>8.2f} {size * n * k * reps / best / 1e9:>8.0f}")
    print(f"{m:>6} {n:>6} {k:>6} {what:>11} {cells[0]} {cells[1]}")
