"""Run under torchrun (one process per rank): hpmoe.torch.MoEFFN over the EP group of all processes. Step 1
and 2 (same routing, same heap: epochs advance, bits repeat), then steps 3-5 with a routing that sends every
rank's tokens to rank 0's experts, which outgrows the bucket of steps 1-2. With the speculative bucket (the
default; HPMOE_SPECULATIVE=0 for the bucket agreed before each forward) step 3 stops before any row moves
and runs as passes, step 4 too, and step 5's forward reads step 3's need (HPMOE_OVERFLOW_LAG=2) and grows the
bucket; agreed, step 3 grows it first. Rank 0 checks every rank's output and gradients of steps 1, 3 and 5
against the float64 reference, and step 3's y, dx and d topk_weights bitwise against step 5's (a pass
computes each token's rows as one launch does). Exit status 0 only if all pass
(tests/cuda/test_torch_moeffn.py launches it).

HPMOE_SHARED_GPU=1: every rank on GPU 0 and a gloo process group (NCCL refuses two ranks on one GPU); the
ranks' persistent kernels must then run concurrently, which needs the CUDA MPS daemon."""
from __future__ import annotations

import os
import sys

import numpy as np
import torch
import torch.distributed as dist

from hpmoe.reference import moe_reference
from hpmoe.runtime.tolerances import compare
from hpmoe.torch import MoEFFN


def step(m, x, ids, w, dy):
    for t in (x, w, m.w1, m.w2):
        t.grad = None
    y = m(x, ids, w)
    y.backward(dy)
    return {n: t.detach().cpu().float().numpy().copy() for n, t in
            (("y", y), ("dx", x.grad), ("dw1", m.w1.grad), ("dw2", m.w2.grad), ("dtopk_weights", w.grad))}


def check(everyone: list, key: str, ep: int, label: str) -> bool:
    stack = lambda k: np.stack([r[k] for r in everyone])  # noqa: E731
    ids = np.stack([r[key + "_ids"] for r in everyone])
    ref = moe_reference(stack("x"), stack("w1"), stack("w2"), ids, stack(key + "_w"), stack("dy"))
    got = {n: np.stack([r[key][n] for r in everyone]).astype(np.float64) for n in ref}
    ok = True
    for name, err, tol, passed in compare(got, ref, "bf16"):
        print(f"ep={ep} {label} {name:<14} max rel err {err:.3e}  tol {tol:.1e}  {'ok' if passed else 'FAIL'}")
        ok &= passed
    return ok


def main() -> int:
    shared = os.environ.get("HPMOE_SHARED_GPU") == "1"
    dist.init_process_group("gloo" if shared else "nccl")
    rank, ep = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(0 if shared else int(os.environ.get("LOCAL_RANK", rank)))
    torch.manual_seed(rank)
    T, h, inter, E, k = 256, 128, 64, 2, 3  # C = 512: random routing sends at most 2T rows a rank, hot 3T
    os.environ.setdefault("HPMOE_OVERFLOW_LAG", "2")
    speculative = os.environ.get("HPMOE_SPECULATIVE", "1") == "1"
    m = MoEFFN(h, inter, E, k, num_aic=4, num_aiv=4, speculative=speculative)
    x = torch.randn(T, h, device="cuda").bfloat16().requires_grad_()
    ids = torch.stack([torch.randperm(ep * E, device="cuda")[:k] for _ in range(T)]).int()
    w = torch.softmax(torch.randn(T, k, device="cuda"), -1).requires_grad_()
    dy = torch.randn(T, h, device="cuda").bfloat16()
    first, second = step(m, x, ids, w, dy), step(m, x, ids, w, dy)  # a second step on the same heap
    buckets = len(m.runtime._all)
    # Every row of every rank to rank 0's experts (ids 0, 1, 0: 3T rows per source, past steps 1-2's bucket).
    hot = torch.tensor([0, 1, 0], device="cuda", dtype=torch.int32).expand(T, k).contiguous()
    over = step(m, x, hot, w, dy)
    step(m, x, hot, w, dy)
    grown = step(m, x, hot, w, dy)
    mine = {"x": x.detach().double().cpu().numpy(), "w1": m.w1.detach().double().cpu().numpy(),
            "w2": m.w2.detach().double().cpu().numpy(), "dy": dy.double().cpu().numpy(),
            "first": first, "first_ids": ids.cpu().numpy(), "first_w": w.detach().cpu().numpy(),
            "grown": grown, "grown_ids": hot.cpu().numpy(), "grown_w": w.detach().cpu().numpy(),
            "over": over, "over_ids": hot.cpu().numpy(), "over_w": w.detach().cpu().numpy(),
            "over_same": all(np.array_equal(over[n], grown[n]) for n in ("y", "dx", "dtopk_weights")),
            "seen": m.runtime.overflows_seen,
            "same": all(np.array_equal(first[n], second[n]) for n in first),
            "buckets": (buckets, len(m.runtime._all))}
    everyone: list = [None] * ep
    dist.all_gather_object(everyone, mine)
    ok = True
    if rank == 0:
        ok &= check(everyone, "first", ep, "step 1")
        ok &= check(everyone, "over", ep, "step 3 (passes)" if speculative else "step 3 (grown bucket)")
        ok &= check(everyone, "grown", ep, "step 5 (grown bucket)")
        over_same = all(r["over_same"] for r in everyone)
        seen = [r["seen"] for r in everyone]
        print(f"ep={ep} step 3 y, dx, dtopk bitwise step 5's: {over_same}; overflows seen {seen}")
        ok &= over_same and (not speculative or all(s >= 1 for s in seen))
        same = all(r["same"] for r in everyone)
        grew = all(r["buckets"][1] > r["buckets"][0] for r in everyone)
        print(f"ep={ep} second step bitwise identical: {same}")
        print(f"ep={ep} bucket grew for the hot routing: {grew} {[r['buckets'] for r in everyone]}")
        ok &= same and grew
    flag = torch.tensor([int(ok)], device="cpu" if shared else "cuda")  # gloo: host tensors; NCCL: device ones
    dist.broadcast(flag, 0)
    dist.destroy_process_group()
    return 0 if int(flag) else 1


if __name__ == "__main__":
    sys.exit(main())
