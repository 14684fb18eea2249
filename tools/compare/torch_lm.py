#!/usr/bin/python3
"""Chapter 12's Llama-style block written again in PyTorch, from the papers, sharing no code with stepformer: it
loads the weights, the batch, the logits and the gradients that `lm_fixture parity FILE` wrote, recomputes
the logits and the loss's gradient of every parameter, and prints the largest differences (the target: 1e-4).
Then it runs the same weights with the other RoPE pairing, to show that the pairing is part of the function.

    build/release/bin/lm_fixture --block llama parity /tmp/lm.safetensors
    /usr/bin/python3 tools/compare/torch_lm.py /tmp/lm.safetensors

The pieces: RMSNorm y = x / sqrt(mean(x^2) + eps) * g (Zhang & Sennrich 2019); SwiGLU W_out(silu(x W_gate) *
x W_value) (Shazeer 2020); RoPE on q and k (Su et al. 2021), pairs (i, i + Dh/2) for "half", (2i, 2i+1) for
"adjacent"; grouped-query attention, query head h reading key/value head h // (H / Hkv) (Ainslie et al. 2023);
pre-norm blocks, a final RMSNorm, no biases, the output projection tied to the token embedding, which is read
times sqrt(D).
"""
import json
import math
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}


def load_safetensors(path):
    """The safetensors format: an 8-byte little-endian header size, a JSON header, then the raw tensors."""
    with open(path, "rb") as f:
        blob = f.read()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + size])
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        start, end = info["data_offsets"]
        raw = bytearray(blob[8 + size + start:8 + size + end])
        tensors[name] = torch.frombuffer(raw, dtype=DTYPES[info["dtype"]]).reshape(info["shape"]).clone()
    return tensors, meta


def rms_norm(x, g, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


def rotate(x, pairing):
    """x [B, H, T, Dh] at positions 0..T-1."""
    T, Dh = x.shape[2], x.shape[3]
    theta = 10000.0 ** (-torch.arange(0, Dh, 2, dtype=torch.float64) / Dh)   # [Dh/2]
    angle = torch.arange(T, dtype=torch.float64)[:, None] * theta[None, :]     # [T, Dh/2]
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    if pairing == "half":
        a, b = x[..., : Dh // 2], x[..., Dh // 2:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)


def forward(p, ids, meta, pairing):
    L, D, H, Hkv = (int(meta[k]) for k in ("n_layers", "d_model", "n_heads", "n_kv_heads"))
    eps, Dh = float(meta["eps"]), D // H
    B, T = ids.shape
    x = p["tokens.weight"][ids] * math.sqrt(D)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    for i in range(L):
        w = lambda name: p[f"blocks.{i}.{name}"]  # noqa: E731
        h = rms_norm(x, w("attention_norm.weight"), eps)
        q = (h @ w("attention.w_q.weight").T).view(B, T, H, Dh).transpose(1, 2)
        k = (h @ w("attention.w_k.weight").T).view(B, T, Hkv, Dh).transpose(1, 2)
        v = (h @ w("attention.w_v.weight").T).view(B, T, Hkv, Dh).transpose(1, 2)
        q, k = rotate(q, pairing), rotate(k, pairing)
        k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(Dh)
        context = scores.masked_fill(future, float("-inf")).softmax(-1) @ v
        x = x + context.transpose(1, 2).reshape(B, T, D) @ w("attention.w_o.weight").T
        h = rms_norm(x, w("feed_forward_norm.weight"), eps)
        gate, value = h @ w("feed_forward.w_gate.weight").T, h @ w("feed_forward.w_value.weight").T
        x = x + (torch.nn.functional.silu(gate) * value) @ w("feed_forward.w_out.weight").T
    x = rms_norm(x, p["final_norm.weight"], eps)
    return x @ p["tokens.weight"].T


def main():
    tensors, meta = load_safetensors(sys.argv[1])
    if meta.get("block") != "llama":
        sys.exit(f"torch_lm.py recomputes the llama block only; the file holds {meta.get('block')}")
    params = {k: v.requires_grad_() for k, v in tensors.items() if not k.split(".")[0] in ("input", "output", "grad")}
    ids, targets = tensors["input.ids"], tensors["input.targets"]
    logits = forward(params, ids, meta, meta["rope_pairing"])
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss.backward()
    print(f"PyTorch {torch.__version__}: {len(params)} parameters, pairing {meta['rope_pairing']}")
    print(f"logits: max |ours - torch| = {(logits - tensors['output.logits']).abs().max().item():.3g}")
    print(f"loss:   ours {tensors['output.loss'].item():.6f}, torch {loss.item():.6f}")
    worst = max(((p.grad - tensors["grad." + n]).abs().max().item(), n) for n, p in params.items())
    print(f"gradients: max |ours - torch| = {worst[0]:.3g} ({worst[1]})")
    other = "adjacent" if meta["rope_pairing"] == "half" else "half"
    with torch.no_grad():
        changed = (forward(params, ids, meta, other) - logits).abs().max().item()
    print(f"the same weights with the {other} pairing: logits differ by up to {changed:.3g}")
    ok = (logits - tensors["output.logits"]).abs().max().item() <= 1e-4 and worst[0] <= 1e-4
    print("within 1e-4: yes" if ok else "within 1e-4: NO")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
