#!/usr/bin/python3
"""One training step of the same Transformer in PyTorch, for bench/train_bench.cpp's numbers.

Same shapes as train_bench: small (d_model 128, 2+2 layers, 4 heads, d_ff 512, batch 64 x 16) or base
(d_model 512, 6+6, 8 heads, d_ff 2048, batch 32 x 32), 8000-word vocabularies, post-norm layers,
dropout 0.1, label smoothing 0.1, Adam(0.9, 0.98, 1e-9), gradient clipping at 1. Uses Debian's
python3-torch (1.13):

    /usr/bin/python3 tools/compare/torch_train_step.py small --threads 2
    /usr/bin/python3 tools/compare/torch_train_step.py base --threads 2 --precision bf16

--precision bf16 runs the forward and the loss under torch.autocast("cpu", dtype=torch.bfloat16), the
setup a PyTorch user would pick for speed (train_bench --precision bf16 is the same recipe in stepformer).
"""
import contextlib
import argparse
import math
import resource
import time

import torch
from torch import nn

from blas_check import warn_unless_openmp_openblas


class Model(nn.Module):
    """The paper's encoder-decoder (post-norm), embeddings times sqrt(d_model) plus sinusoidal positions."""

    def __init__(self, src_vocab, tgt_vocab, d_model, layers, heads, d_ff, dropout=0.1, max_len=256):
        super().__init__()
        self.d_model = d_model
        self.src_embed = nn.Embedding(src_vocab, d_model, padding_idx=0)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model, padding_idx=0)
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)
        self.drop = nn.Dropout(dropout)
        self.transformer = nn.Transformer(d_model, heads, layers, layers, d_ff, dropout, batch_first=True)
        self.out = nn.Linear(d_model, tgt_vocab)

    def embed(self, table, ids):
        return self.drop(table(ids) * math.sqrt(self.d_model) + self.pe[: ids.size(1)])

    def forward(self, src, tgt):
        causal = self.transformer.generate_square_subsequent_mask(tgt.size(1))
        h = self.transformer(self.embed(self.src_embed, src), self.embed(self.tgt_embed, tgt), tgt_mask=causal,
                             src_key_padding_mask=src == 0, tgt_key_padding_mask=tgt == 0,
                             memory_key_padding_mask=src == 0)
        return self.out(h)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("config", choices=["small", "base"], nargs="?", default="small")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    warn_unless_openmp_openblas()
    base = a.config == "base"
    d, layers, heads, d_ff = (512, 6, 8, 2048) if base else (128, 2, 4, 512)
    batch, length = (32, 32) if base else (64, 16)
    steps = a.steps or (5 if base else 30)
    torch.manual_seed(1)
    model = Model(8000, 8000, d, layers, heads, d_ff)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1)
    src, tgt_in, tgt_out = (torch.randint(4, 8000, (batch, length)) for _ in range(3))

    def autocast():
        if a.precision == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step():
        model.train()
        opt.zero_grad()
        with autocast():
            logits = model(src, tgt_in)
            loss = loss_fn(logits.reshape(-1, 8000), tgt_out.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    step()  # warm-up
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    params = sum(p.numel() for p in model.parameters())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"PyTorch {torch.__version__} {a.config} config, {a.precision}: {params} parameters, batch {batch} x {length} tokens, "
          f"{torch.get_num_threads()} threads: train step {min(times) * 1e3:.1f} ms (best) "
          f"{sum(times) / len(times) * 1e3:.1f} ms (mean of {steps}), peak RSS {peak:.0f} MB")


if __name__ == "__main__":
    main()
