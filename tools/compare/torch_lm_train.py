#!/usr/bin/python3
"""bench/lm_bench.cpp's model in PyTorch: the Llama-style block of chapter 12 (pre-norm RMSNorm, SwiGLU, RoPE,
grouped-query attention, no biases, tied embeddings), D 256, 4 layers, 8 heads of which 2 key/value, SwiGLU hidden
688, vocabulary 2000, batch 16 x 128 random tokens; Adam (0.9, 0.95), gradient clipping at 1. Prints the training
step's best and mean time and tokens/s, as lm_bench does. --precision bf16 runs the forward and the loss under
torch.autocast("cpu", dtype=torch.bfloat16), as a PyTorch user would for speed. --device cuda runs it on the
GPU (autocast("cuda") for bf16), each step ending in a synchronisation, as lm_bench's step ends reading its loss.

    OMP_NUM_THREADS=2 LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \\
        /usr/bin/python3 tools/compare/torch_lm_train.py --threads 2
"""
import argparse
import contextlib
import math
import time

import torch
import torch.nn.functional as F

from blas_check import warn_unless_openmp_openblas


class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight, self.eps = torch.nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x):
    """Half-split pairs (i, i + Dh/2), positions 0..T-1; x [B, H, T, Dh]."""
    T, Dh = x.shape[2], x.shape[3]
    theta = 10000.0 ** (-torch.arange(0, Dh, 2, dtype=torch.float32, device=x.device) / Dh)
    angle = torch.arange(T, dtype=torch.float32, device=x.device)[:, None] * theta[None, :]
    cos, sin = angle.cos(), angle.sin()
    a, b = x[..., : Dh // 2], x[..., Dh // 2:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


class Block(torch.nn.Module):
    def __init__(self, d, heads, kv_heads, hidden):
        super().__init__()
        self.h, self.kv, self.dh = heads, kv_heads, d // heads
        self.attention_norm, self.feed_forward_norm = RMSNorm(d), RMSNorm(d)
        self.w_q = torch.nn.Linear(d, d, bias=False)
        self.w_k = torch.nn.Linear(d, kv_heads * self.dh, bias=False)
        self.w_v = torch.nn.Linear(d, kv_heads * self.dh, bias=False)
        self.w_o = torch.nn.Linear(d, d, bias=False)
        self.w_gate = torch.nn.Linear(d, hidden, bias=False)
        self.w_value = torch.nn.Linear(d, hidden, bias=False)
        self.w_out = torch.nn.Linear(hidden, d, bias=False)

    def forward(self, x, future):
        B, T, D = x.shape
        h = self.attention_norm(x)
        q = rope(self.w_q(h).view(B, T, self.h, self.dh).transpose(1, 2))
        k = rope(self.w_k(h).view(B, T, self.kv, self.dh).transpose(1, 2))
        v = self.w_v(h).view(B, T, self.kv, self.dh).transpose(1, 2)
        k, v = k.repeat_interleave(self.h // self.kv, 1), v.repeat_interleave(self.h // self.kv, 1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.dh)
        context = scores.masked_fill(future, float("-inf")).softmax(-1) @ v
        x = x + self.w_o(context.transpose(1, 2).reshape(B, T, D))
        h = self.feed_forward_norm(x)
        return x + self.w_out(F.silu(self.w_gate(h)) * self.w_value(h))


class LanguageModel(torch.nn.Module):
    def __init__(self, vocab=2000, d=256, layers=4, heads=8, kv_heads=2, hidden=688):
        super().__init__()
        self.d = d
        self.tokens = torch.nn.Embedding(vocab, d)
        torch.nn.init.normal_(self.tokens.weight, 0, 0.02)  # tied, so GPT-2's init (language_model.cpp)
        self.blocks = torch.nn.ModuleList(Block(d, heads, kv_heads, hidden) for _ in range(layers))
        self.final_norm = RMSNorm(d)

    def forward(self, ids):
        T = ids.shape[1]
        future = torch.ones(T, T, dtype=torch.bool, device=ids.device).triu(1)
        x = self.tokens(ids) * math.sqrt(self.d)
        for block in self.blocks:
            x = block(x, future)
        return self.final_norm(x) @ self.tokens.weight.T


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    if device.type == "cpu":
        warn_unless_openmp_openblas()
    torch.manual_seed(1)
    B, T, V = 16, 128, 2000
    model = LanguageModel(V).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.95), eps=1e-8)
    ids = torch.randint(0, V, (B, T + 1)).to(device)
    autocast = (torch.autocast(device.type, dtype=torch.bfloat16) if args.precision == "bf16"
                else contextlib.nullcontext())

    def step():
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            logits = model(ids[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()

    step()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    params = sum(p.numel() for p in model.parameters())
    print(f"PyTorch {torch.__version__} lm llama {args.precision}: {params} parameters, batch {B} x {T} tokens, "
          f"{str(torch.get_num_threads()) + ' threads' if device.type == 'cpu' else device}: train step {min(times) * 1e3:.1f} ms (best) "
          f"{sum(times) / len(times) * 1e3:.1f} ms (mean of {args.steps}), {B * T / min(times):.0f} tokens/s")


if __name__ == "__main__":
    main()
