"""Digests of one user step's outputs (y, dx, d topk_weights, dw1, dw2) per shape, so that two builds of the
CUDA library can be compared bit for bit: run it once per build (HPMOE_BUILD_DIR) and diff the lines. Fixed
seeds, EP 1, random routing, bf16, MoEFFN's schedule for the shape; also the largest error of each output
against the PyTorch path (cuda_torch_path.py), a sanity check, not the test (tests/cuda compare to float64).

    HPMOE_BUILD_DIR=build/chain python3 benchmarks/cuda_build_digest.py mixtral-8x7b:4096 qwen3-30b-a3b:1000
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_torch_path import moe_ffn_torch  # noqa: E402
from cuda_user_step import SHAPES  # noqa: E402

from hpmoe.torch import MoEFFN  # noqa: E402


def digest(t: torch.Tensor) -> str:
    return hashlib.sha256(t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes()).hexdigest()[:16]


def step(model: str, tokens: int, tile_m: int | None = None) -> list[str]:
    h, inter, E, k = SHAPES[model]
    torch.manual_seed(0)
    m = MoEFFN(h, inter, E, k, tile_m=tile_m)
    x = torch.randn(tokens, h, device="cuda").bfloat16().requires_grad_()
    ids = torch.argsort(torch.rand(tokens, E, device="cuda"), dim=1)[:, :k].int()
    w = torch.softmax(torch.randn(tokens, k, device="cuda"), -1).requires_grad_()
    dy = torch.randn(tokens, h, device="cuda").bfloat16()
    y = m(x, ids, w)
    y.backward(dy)
    outs = {"y": y, "dx": x.grad, "dtw": w.grad, "dw1": m.w1.grad, "dw2": m.w2.grad}
    w1, w2 = m.w1.detach().clone().requires_grad_(), m.w2.detach().clone().requires_grad_()
    xr, wr = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    yr = moe_ffn_torch(xr, w1, w2, ids.long(), wr)
    yr.backward(dy)
    refs = {"y": yr, "dx": xr.grad, "dtw": wr.grad, "dw1": w1.grad, "dw2": w2.grad}
    lines = []
    for name, t in outs.items():
        r = refs[name].float()
        err = (t.float() - r).abs().max().item() / max(r.abs().max().item(), 1e-30)
        lines.append(f"{model}:{tokens} {name} {digest(t)} (max error / max |torch| {err:.2e})")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("shapes", nargs="+", help=f"MODEL:TOKENS, MODEL one of {', '.join(SHAPES)}")
    p.add_argument("--tile-m", type=int, default=None, metavar="N",
                   help="MoEFFN(tile_m=N): rows per row tile (default 128; the tall GMM tile's build wants 256)")
    args = p.parse_args()
    for s in args.shapes:
        model, tokens = s.split(":")
        if model not in SHAPES:
            p.error(f"unknown model {model!r} (one of {', '.join(SHAPES)})")
        for line in step(model, int(tokens), args.tile_m):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
