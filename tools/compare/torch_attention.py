#!/usr/bin/python3
"""Attention alone in PyTorch, for bench/attention_bench.cpp's table: the same shapes (batch 1, 8 heads of 64,
causal, float32), forward + backward of softmax(Q K^T / 8, future keys at -inf) V, the best of several runs per
length. PyTorch 1.13 (Debian's python3-torch) has no fused scaled_dot_product_attention: this matmul-softmax-
matmul is what its nn.MultiheadAttention runs. With --precision bf16 the forward runs under
torch.autocast("cpu", dtype=torch.bfloat16), as a PyTorch user would for speed.
With --device cuda (a PyTorch with a GPU, as on tools/gpu/check.sh's machine) it times instead the fused
torch.nn.functional.scaled_dot_product_attention(is_causal=True) on q, k, v in the precision's dtype (PyTorch picks
its flash, memory-efficient or cuDNN kernel), each step ending in torch.cuda.synchronize().

    OMP_NUM_THREADS=2 LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \\
        /usr/bin/python3 tools/compare/torch_attention.py --threads 2 --max-len 4096
    python3 tools/compare/torch_attention.py --device cuda --max-len 4096 [--precision bf16]
"""
import argparse
import contextlib
import time

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--max-len", type=int, default=4096)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args()
    cuda = args.device == "cuda"
    if args.threads:
        torch.set_num_threads(args.threads)
    B, H, Dh = 1, 8, 64
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if args.precision == "bf16"
                else contextlib.nullcontext())
    where = torch.cuda.get_device_name() + ", scaled_dot_product_attention" if cuda else \
        f"{torch.get_num_threads()} threads"
    print(f"PyTorch {torch.__version__}, attention, causal, batch {B}, {H} heads of {Dh}, {args.precision}, {where}")
    print(f"{'T':>6} {'fwd+bwd ms':>12}")
    T = 128
    while T <= args.max_len:
        gen = torch.Generator().manual_seed(1)
        dtype = torch.bfloat16 if cuda and args.precision == "bf16" else torch.float32
        q, k, v = (torch.rand(B, H, T, Dh, generator=gen).mul(2).sub(1).to(args.device, dtype).requires_grad_()
                   for _ in range(3))
        g = torch.rand(B, H, T, Dh, generator=gen).mul(2).sub(1).to(args.device, dtype)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)

        def step():
            if cuda:
                torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)
                torch.cuda.synchronize()
            else:
                with autocast:
                    s = (q @ k.transpose(-2, -1)) / 8.0
                    out = torch.softmax(s.masked_fill(future, float("-inf")), -1) @ v
                out.float().backward(g)
            q.grad = k.grad = v.grad = None

        step()
        best, spent, runs = float("inf"), 0.0, 0
        while runs < 2 or spent < (4.0 if T >= 2048 else 1.0):
            start = time.perf_counter()
            step()
            t = time.perf_counter() - start
            best, spent, runs = min(best, t), spent + t, runs + 1
        print(f"{T:>6} {1e3 * best:>12.2f}", flush=True)
        T *= 2


if __name__ == "__main__":
    main()
