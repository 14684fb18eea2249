#!/usr/bin/python3
"""Validation bits per byte at equal wall time, PyTorch's side: chapter 12's Llama-style model (torch_lm.py's
forward) trained from the same starting weights on the same token streams with 12_modern_lm's recipe (Adam 0.9 /
0.95, eps 1e-8; warmup min(100, steps / 10 + 1) then a cosine to a tenth of the peak; clipping at 1; batches of
windows of T + 1 tokens at uniform random starts), then validated on the same windows of the held-out books
(every T tokens from the start, the first `valid_windows`). The windows' random starts are PyTorch's own draws.

    build/release/bin/lm_fixture data /tmp/lm_data.safetensors
    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \\
        /usr/bin/python3 tools/compare/torch_lm_bpb.py /tmp/lm_data.safetensors --steps 400 --threads 2

--steps: choose it from each side's own step time so that both train for the same wall time (docs/12_modern_lm.md).
"""
import argparse
import math
import time

import torch

from torch_lm import forward, load_safetensors


def learning_rate(step, peak, warmup, total):
    """nn::CosineWarmup with floor = peak / 10 (schedule.cpp)."""
    s, floor = max(step, 1), peak / 10
    if s < warmup:
        return peak * s / warmup
    if s >= total:
        return floor
    progress = (s - warmup) / max(total - warmup, 1)
    return floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    tensors, meta = load_safetensors(args.data)
    train, valid = tensors.pop("data.train"), tensors.pop("data.valid")
    params = {k: v.requires_grad_() for k, v in tensors.items()}
    B, T, peak = int(meta["batch"]), int(meta["seq_len"]), float(meta["lr"])
    optimizer = torch.optim.Adam(params.values(), lr=peak, betas=(0.9, 0.95), eps=1e-8)
    warmup = min(100, args.steps // 10 + 1)
    loss_of = lambda ids: torch.nn.functional.cross_entropy(  # noqa: E731
        forward(params, ids[:, :-1], meta, meta["rope_pairing"]).flatten(0, 1), ids[:, 1:].flatten())

    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        starts = torch.randint(0, len(train) - T, (B,))
        ids = torch.stack([train[s:s + T + 1] for s in starts.tolist()])
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(ids)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, peak, warmup, args.steps)
        optimizer.step()
        if step % 50 == 0 or step == args.steps:
            print(f"step {step}/{args.steps}: loss {loss.item():.3f}, {time.perf_counter() - start:.0f} s", flush=True)
    seconds = time.perf_counter() - start

    windows = [valid[i * T:i * T + T + 1] for i in range(min(int(meta["valid_windows"]), (len(valid) - 1) // T))]
    total, tokens = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(windows), B):
            ids = torch.stack(windows[i:i + B])
            total += loss_of(ids).item() * ids[:, 1:].numel()
            tokens += ids[:, 1:].numel()
    nats = total / tokens
    share = int(meta["valid_bytes"]) * tokens / len(valid)  # the windows' share of the text's bytes, as ours
    bpb = nats * tokens / (math.log(2) * int(share))
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads: {args.steps} steps in {seconds:.1f} s "
          f"({args.steps * B * T / seconds:.0f} tokens/s); valid {nats:.3f} nats/token, {bpb:.3f} bits/byte")


if __name__ == "__main__":
    main()
