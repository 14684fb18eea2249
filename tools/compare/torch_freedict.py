#!/usr/bin/python3
"""The freedict task in PyTorch, for docs/07_transformer.md's comparison: same data, same tokens, same time.

`07_transformer freedict --export DIR ...` writes the splits exactly as our model reads them (SentencePiece
pieces learned from the training split), the vocabularies in id order, the test references as words and our
greedy translations (DIR/test.ours). This script trains the same architecture (tools/compare/
torch_train_step.py's Model: post-norm nn.Transformer, Glorot-uniform matrices as ours) with the same recipe
(Adam 0.9/0.98/1e-9, the warmup schedule, label smoothing 0.1, clipping at 1, batches built the same way, one
at random per step) for the given wall time, decodes the test split greedily, writes DIR/test.torch and
scores it with our scorer (`07_transformer bleu`), so both BLEUs come from the same code on the same words.
Uses Debian's python3-torch (1.13):

    build/release/bin/07_transformer freedict --export /tmp/fd ...    # note its "trained N steps in ..."
    /usr/bin/python3 tools/compare/torch_freedict.py /tmp/fd --seconds 1200 --d-model 128 --d-ff 512 ...
"""
import argparse
import math
import os
import random
import subprocess
import time
import warnings

import torch
from torch import nn

from torch_train_step import Model

PAD, BOS, EOS, UNK = 0, 1, 2, 3


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def read_ids(path, vocab):
    return [[vocab.get(t, UNK) for t in line.split(" ") if t] for line in read_lines(path)]


def batches_of(pairs, batch_pairs, batch_tokens):
    """transformer/src/data.cpp's make_batches / make_token_batches: sorted by length, then cut."""
    pairs = sorted(pairs, key=lambda p: (len(p[0]), len(p[1])))  # stable, as std::stable_sort
    out, first, longest = [], 0, 0
    if batch_tokens <= 0:
        return [pairs[i:i + batch_pairs] for i in range(0, len(pairs), batch_pairs)]
    for i in range(len(pairs) + 1):
        length = max(len(pairs[i][0]), len(pairs[i][1]) + 1) if i < len(pairs) else 0
        fits = i < len(pairs) and (i - first + 1) * max(longest, length) <= batch_tokens
        if not fits and i > first:
            out.append(pairs[first:i])
            first, longest = i, 0
        longest = max(longest, length)
    return out


def tensors(batch):
    s_len = max(len(s) for s, _ in batch)
    t_len = max(len(t) for _, t in batch) + 1
    src = torch.tensor([s + [PAD] * (s_len - len(s)) for s, _ in batch])
    tgt_in = torch.tensor([[BOS] + t + [PAD] * (t_len - 1 - len(t)) for _, t in batch])
    tgt_out = torch.tensor([t + [EOS] + [PAD] * (t_len - 1 - len(t)) for _, t in batch])
    return src, tgt_in, tgt_out


@torch.no_grad()
def greedy(model, src_ids, max_len):
    model.eval()
    src = torch.tensor([src_ids])
    memory = model.transformer.encoder(model.embed(model.src_embed, src), src_key_padding_mask=src == PAD)
    out = [BOS]
    for _ in range(max_len):
        tgt = torch.tensor([out])
        h = model.transformer.decoder(model.embed(model.tgt_embed, tgt), memory,
                                      tgt_mask=model.transformer.generate_square_subsequent_mask(len(out)),
                                      memory_key_padding_mask=src == PAD)
        logits = model.out(h[0, -1])
        logits[[PAD, BOS, UNK]] = -math.inf  # as transformer/src/decoding.cpp: never PAD, BOS or UNK
        token = int(logits.argmax())
        if token == EOS:
            break
        out.append(token)
    return out[1:]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--seconds", type=float, required=True, help="training wall time (ours, from its output)")
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-ff", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--batch-tokens", type=int, default=0)
    p.add_argument("--warmup", type=int, default=1000)
    p.add_argument("--lr-factor", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--scorer", default=os.path.join(os.path.dirname(__file__), "../../build/release/bin/07_transformer"))
    a = p.parse_args()
    warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")  # eval's fast path, 1.13
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)

    vocab = {}
    for side in ("de", "en"):
        vocab[side] = {t: i for i, t in enumerate(read_lines(os.path.join(a.dir, "vocab." + side)))}
    train = list(zip(read_ids(os.path.join(a.dir, "train.de"), vocab["de"]),
                     read_ids(os.path.join(a.dir, "train.en"), vocab["en"])))
    test_src = read_ids(os.path.join(a.dir, "test.de"), vocab["de"])
    batches = [tensors(b) for b in batches_of(train, a.batch, a.batch_tokens)]

    model = Model(len(vocab["de"]), len(vocab["en"]), a.d_model, a.layers, a.heads, a.d_ff, a.dropout)
    for w in model.parameters():  # ours: every matrix Glorot-uniform (transformer/model.h, glorot_init)
        if w.dim() == 2:
            nn.init.xavier_uniform_(w)
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)
    start, steps, tokens = time.perf_counter(), 0, 0
    while time.perf_counter() - start < a.seconds:
        steps += 1
        lr = a.lr_factor * a.d_model ** -0.5 * min(steps ** -0.5, steps * a.warmup ** -1.5)
        for g in opt.param_groups:
            g["lr"] = lr
        src, tgt_in, tgt_out = batches[rng.randrange(len(batches))]
        model.train()
        opt.zero_grad()
        logits = model(src, tgt_in)
        loss = loss_fn(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += int((tgt_out != PAD).sum())
        if steps % 500 == 0:
            print(f"step {steps}  loss {loss.item():.3f}  {tokens / (time.perf_counter() - start):.0f} tok/s",
                  flush=True)
    elapsed = time.perf_counter() - start
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads: {steps} steps in {elapsed:.0f} s "
          f"({tokens / elapsed:.0f} target tokens/s), {sum(w.numel() for w in model.parameters())} parameters")

    pieces = [t for t, _ in sorted(vocab["en"].items(), key=lambda kv: kv[1])]
    out_path = os.path.join(a.dir, "test.torch")
    with open(out_path, "w", encoding="utf-8") as f:
        for ids in test_src:
            words = "".join(pieces[i] for i in greedy(model, ids, 2 * len(ids) + 10)).replace("\u2581", " ").split()
            f.write(" ".join(words) + "\n")
    print(f"wrote {out_path}")
    if os.path.exists(a.scorer):
        subprocess.run([a.scorer, "bleu", os.path.join(a.dir, "test.ref"), out_path], check=True)
    else:
        print(f"score it with: 07_transformer bleu {a.dir}/test.ref {out_path}")


if __name__ == "__main__":
    main()
