#!/usr/bin/python3
"""Reference values for stepformer's nn tests, computed by PyTorch (Debian's python3-torch 1.13).

Writes tests/fixtures/nn/*.safetensors: inputs, weights, outputs and gradients of each layer and loss, and
10-step trajectories of each optimizer. The files are committed; the tests never need PyTorch.
Run from the repository root:  /usr/bin/python3 tools/make_nn_fixtures.py
(apt-get install python3-torch; Debian's interpreter, not a virtualenv's). The safetensors writer below is
our own few lines (Debian has no python3-safetensors): sorted names, header padded to 8 bytes.
"""
import json
import pathlib
import struct

import torch
import torch.nn.functional as F

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "nn"
CODES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.bool: "BOOL"}


def save(name, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for key in sorted(tensors):
        t = tensors[key].detach().contiguous().cpu()
        data = t.numpy().tobytes()
        header[key] = {"dtype": CODES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def module_case(module, x, extra_inputs=()):
    """Forward, then backward of sum(y * dy) for a fixed random dy: the gradients of every parameter and x."""
    x = x.clone().requires_grad_(x.is_floating_point())
    y = module(x, *extra_inputs)
    dy = torch.randn_like(y)
    y.backward(dy)
    out = {"x": x, "y": y, "dy": dy}
    if x.requires_grad:
        out["grad.x"] = x.grad
    for name, p in module.named_parameters():
        out[f"param.{name}"] = p
        out[f"grad.{name}"] = p.grad
    return out


def layers():
    torch.manual_seed(0)
    save("linear", module_case(torch.nn.Linear(4, 3), torch.randn(2, 5, 4)))
    save("linear_nobias", module_case(torch.nn.Linear(4, 3, bias=False), torch.randn(6, 4)))
    emb = torch.nn.Embedding(7, 3, padding_idx=2)
    ids = torch.tensor([[1, 2, 6], [2, 2, 0]])
    y = emb(ids)
    dy = torch.randn_like(y)
    y.backward(dy)
    save("embedding", {"ids": ids, "y": y, "dy": dy, "param.weight": emb.weight, "grad.weight": emb.weight.grad})
    ln = torch.nn.LayerNorm(6, eps=1e-5)
    with torch.no_grad():  # non-trivial affine parameters
        ln.weight.copy_(torch.randn(6))
        ln.bias.copy_(torch.randn(6))
    save("layer_norm", module_case(ln, torch.randn(2, 3, 6) * 3 + 1))
    save("layer_norm_noaffine", module_case(torch.nn.LayerNorm(5, elementwise_affine=False), torch.randn(4, 5)))
    save("relu", module_case(torch.nn.ReLU(), torch.randn(3, 5)))
    save("gelu", module_case(torch.nn.GELU(), torch.randn(3, 5) * 2))
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    x = torch.randn(3, 4)
    save("sequential_state", dict(model.state_dict()), {"written_by": "torch " + torch.__version__})
    save("sequential_io", {"x": x, "y": model(x)})


def losses():
    torch.manual_seed(1)
    logits = torch.randn(6, 5)
    targets = torch.tensor([0, 4, -100, 2, 2, -100])
    out = {"logits": logits, "targets": targets}
    for reduction in ("mean", "sum", "none"):
        for smoothing in (0.0, 0.1):
            x = logits.clone().requires_grad_()
            loss = F.cross_entropy(x, targets, ignore_index=-100, label_smoothing=smoothing, reduction=reduction)
            upstream = torch.randn_like(loss) if reduction == "none" else torch.ones_like(loss)
            loss.backward(upstream)
            key = f"{reduction}.s{smoothing}"
            out[f"loss.{key}"], out[f"grad.{key}"], out[f"upstream.{key}"] = loss, x.grad, upstream
    save("cross_entropy", out)
    a, b = torch.randn(4, 3).requires_grad_(), torch.randn(4, 3)
    loss = F.mse_loss(a, b)
    loss.backward()
    save("mse", {"input": a, "target": b, "loss.mean": loss, "grad.mean": a.grad,
                 "loss.sum": F.mse_loss(a, b, reduction="sum")})


OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.01),
    "adam_paper": lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.9, 0.98), eps=1e-9),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
}


def optimizers():
    torch.manual_seed(2)
    start = torch.randn(3, 4)
    grads = torch.randn(10, 3, 4)
    out = {"start": start, "grads": grads}
    for name, make in OPTIMIZERS.items():
        p = torch.nn.Parameter(start.clone())
        opt = make([p])
        steps = []
        for g in grads:
            p.grad = g.clone()
            opt.step()
            steps.append(p.detach().clone())
        out[f"{name}.trajectory"] = torch.stack(steps)
    save("optimizers", out)


if __name__ == "__main__":
    torch.set_num_threads(1)
    layers()
    losses()
    optimizers()
    print("wrote", ", ".join(sorted(p.name for p in OUT.glob("*.safetensors"))))
