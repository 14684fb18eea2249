#!/usr/bin/python3
"""Reference values for chapters 01-07, computed by PyTorch (Debian's python3-torch 1.13).

The modules are written again here in PyTorch, independently of the C++ code but with the same parameter
names, so a state dict exported here loads into stepformer's modules. For each chapter the script saves the
weights, the inputs, the outputs and, for loss = sum(output * dy) with a fixed random dy, the gradient of
every parameter and input. Sizes are small (d_model 16, 2 heads). Writes tests/fixtures/transformer/.
Run from the repository root:  /usr/bin/python3 tools/make_transformer_fixtures.py
"""
import math
import pathlib
import sys

import torch
import torch.nn as nn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import make_nn_fixtures as common  # noqa: E402  (the safetensors writer)

common.OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "transformer"
D, H, F, N, PAD = 16, 2, 32, 2, 0


def pe_table(max_len, d):
    pe = torch.zeros(max_len, d, dtype=torch.float64)
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    div = torch.pow(10000.0, torch.arange(0, d, 2, dtype=torch.float64) / d)  # 10000^(2i/d), i = 0, 1, ...
    pe[:, 0::2] = torch.sin(pos / div)
    pe[:, 1::2] = torch.cos(pos / div[: d // 2])
    return pe.float()


class Embedding(nn.Module):
    def __init__(self, vocab, max_len=32):
        super().__init__()
        self.tokens = nn.Embedding(vocab, D, padding_idx=PAD)
        self.register_buffer("pe", pe_table(max_len, D))

    def forward(self, ids):
        return self.tokens(ids) * math.sqrt(D) + self.pe[: ids.shape[1]]


def attention(q, k, v, blocked):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if blocked is not None:
        scores = scores.masked_fill(blocked, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


class MultiHeadAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(D, D) for _ in range(4))

    def forward(self, q_in, k_in, v_in, blocked):
        def split(x):
            return x.view(x.shape[0], x.shape[1], H, D // H).transpose(1, 2)

        ctx, w = attention(split(self.w_q(q_in)), split(self.w_k(k_in)), split(self.w_v(v_in)), blocked)
        return self.w_o(ctx.transpose(1, 2).contiguous().view(q_in.shape[0], q_in.shape[1], D)), w


class AddNorm(nn.Module):
    def __init__(self, pre_norm=False):
        super().__init__()
        self.norm, self.pre_norm = nn.LayerNorm(D), pre_norm

    def forward(self, x, sublayer):
        return x + sublayer(self.norm(x)) if self.pre_norm else self.norm(x + sublayer(x))


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(D, F), nn.Linear(F, D)

    def forward(self, x):
        return self.w_2(torch.relu(self.w_1(x)))


class EncoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn, self.ffn = MultiHeadAttention(), FeedForward()
        self.norm_attn, self.norm_ffn = AddNorm(), AddNorm()

    def forward(self, x, blocked):
        x = self.norm_attn(x, lambda t: self.self_attn(t, t, t, blocked)[0])
        return self.norm_ffn(x, self.ffn)


class DecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn, self.cross_attn, self.ffn = MultiHeadAttention(), MultiHeadAttention(), FeedForward()
        self.norm_self, self.norm_cross, self.norm_ffn = AddNorm(), AddNorm(), AddNorm()

    def forward(self, x, memory, tgt_blocked, src_blocked):
        x = self.norm_self(x, lambda t: self.self_attn(t, t, t, tgt_blocked)[0])
        x = self.norm_cross(x, lambda t: self.cross_attn(t, memory, memory, src_blocked)[0])
        return self.norm_ffn(x, self.ffn)


def pad_mask(ids):
    return (ids == PAD)[:, None, None, :]


def decoder_mask(ids):
    T = ids.shape[1]
    return pad_mask(ids) | torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)[None, None]


class Encoder(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.embed, self.layers = Embedding(vocab), nn.ModuleList(EncoderLayer() for _ in range(N))

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, pad_mask(ids))
        return x


class Decoder(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.embed, self.layers = Embedding(vocab), nn.ModuleList(DecoderLayer() for _ in range(N))

    def forward(self, ids, memory, src_ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, memory, decoder_mask(ids), pad_mask(src_ids))
        return x


class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab):
        super().__init__()
        self.encoder, self.decoder = Encoder(src_vocab), Decoder(tgt_vocab)
        self.generator = nn.Linear(D, tgt_vocab)

    def forward(self, src, tgt_in):
        return self.generator(self.decoder(tgt_in, self.encoder(src), src))


def randomize(module):
    """Non-trivial LayerNorm parameters (PyTorch starts them at 1 and 0, which would hide mistakes)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if ".norm." in "." + name:
                p.add_(torch.randn_like(p) * 0.1)


def export(name, module, inputs, outputs, extra=None):
    """Backward of sum(out * dy) for each output; saves params (param.*), their grads (grad.*) and inputs."""
    dys = {k: torch.randn_like(v) for k, v in outputs.items()}
    sum((v * dys[k]).sum() for k, v in outputs.items()).backward()
    out = {}
    for k, v in module.state_dict().items():
        out["param." + k] = v
    for k, p in module.named_parameters():
        out["grad." + k] = p.grad if p.grad is not None else torch.zeros_like(p)
    for k, v in inputs.items():
        out["input." + k] = v
        if v.is_floating_point() and v.grad is not None:
            out["grad.input." + k] = v.grad
    for k, v in outputs.items():
        out["output." + k], out["dy." + k] = v, dys[k]
    out.update(extra or {})
    common.save(name, out)


SRC = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 0], [1, 2, 8, 4, 9, 6, 7, 0]])  # 我 有 一 个 好 朋 友 P / 我 有 零 个 女 朋 友 P
TGT = torch.tensor([[1, 3, 4, 5, 6, 7, 8], [1, 3, 4, 9, 10, 7, 0]])      # S I have a good friend . / ... P


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    common.save("01_pe_table", {"pe_7x9": pe_table(7, 9), "pe_50x16": pe_table(50, 16)})  # odd and even d

    emb = Embedding(11)
    export("01_embedding", emb, {"ids": SRC}, {"y": emb(SRC)})

    q, k, v = (torch.randn(2, H, 5, 4, requires_grad=True) for _ in range(3))
    blocked = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]], dtype=torch.bool)[:, None, None, :]
    ctx, w = attention(q, k, v, blocked)
    export("02_sdpa", nn.Module(), {"q": q, "k": k, "v": v, "blocked": blocked}, {"context": ctx, "weights": w})

    mha = MultiHeadAttention()
    xq, xkv = torch.randn(2, 4, D, requires_grad=True), torch.randn(2, 6, D, requires_grad=True)
    src_blocked = pad_mask(torch.tensor([[5, 5, 5, 5, 0, 0], [5, 5, 5, 5, 5, 5]]))
    out, w = mha(xq, xkv, xkv, src_blocked)
    export("02_mha", mha, {"query": xq, "key_value": xkv, "blocked": src_blocked}, {"y": out, "weights": w})

    for pre in (False, True):
        an = AddNorm(pre_norm=pre)
        an.sublayer = nn.Linear(D, D)  # registered as "sublayer.*": the test builds the same Linear
        randomize(an)
        x = torch.randn(2, 3, D, requires_grad=True)
        export(f"03_add_norm_{'pre' if pre else 'post'}", an, {"x": x}, {"y": an(x, an.sublayer)})

    ffn = FeedForward()
    x = torch.randn(2, 3, D, requires_grad=True)
    export("04_ffn", ffn, {"x": x}, {"y": ffn(x)})

    enc = Encoder(11)
    randomize(enc)
    memory = enc(SRC)
    export("05_encoder", enc, {"src": SRC}, {"memory": memory})

    dec = Decoder(12)
    randomize(dec)
    memory = torch.randn(2, 8, D, requires_grad=True)
    export("06_decoder", dec, {"tgt": TGT, "memory": memory, "src": SRC}, {"hidden": dec(TGT, memory, SRC)})
    model = Transformer(11, 12)
    randomize(model)
    export("07_transformer", model, {"src": SRC, "tgt": TGT}, {"logits": model(SRC, TGT)})
    print("wrote", ", ".join(sorted(p.name for p in common.OUT.glob("*.safetensors"))))


if __name__ == "__main__":
    main()
