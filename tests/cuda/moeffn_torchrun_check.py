"""Run under torchrun (one process per GPU): hpmoe.torch.MoEFFN over the EP group of all processes, twice;
rank 0 checks every rank's output and gradients against the float64 reference and that the second step
gave the same bits. Exit status 0 only if all pass (tests/cuda/test_torch_moeffn.py launches it)."""
from __future__ import annotations

import os
import sys

import numpy as np
import torch
import torch.distributed as dist

from hpmoe.reference import moe_reference
from hpmoe.runtime.tolerances import compare
from hpmoe.torch import MoEFFN


def main() -> int:
    dist.init_process_group("nccl")
    rank, ep = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    torch.manual_seed(rank)
    T, h, inter, E, k = 96, 128, 64, 2, 3
    m = MoEFFN(h, inter, E, k, num_aic=4, num_aiv=4)
    x = torch.randn(T, h, device="cuda").bfloat16().requires_grad_()
    ids = torch.stack([torch.randperm(ep * E, device="cuda")[:k] for _ in range(T)]).int()
    w = torch.softmax(torch.randn(T, k, device="cuda"), -1).requires_grad_()
    dy = torch.randn(T, h, device="cuda").bfloat16()
    steps = []
    for _ in range(2):  # a second step on the same heap: epoch counters, same bits
        x.grad = w.grad = m.w1.grad = m.w2.grad = None
        y = m(x, ids, w)
        y.backward(dy)
        steps.append({n: t.detach().cpu().float().numpy().copy() for n, t in
                      (("y", y), ("dx", x.grad), ("dw1", m.w1.grad), ("dw2", m.w2.grad), ("dtopk_weights", w.grad))})
    mine = {"x": x.detach().double().cpu().numpy(), "w1": m.w1.detach().double().cpu().numpy(),
            "w2": m.w2.detach().double().cpu().numpy(), "ids": ids.cpu().numpy(), "w": w.detach().cpu().numpy(),
            "dy": dy.double().cpu().numpy(), "out": steps[0],
            "same": all(np.array_equal(steps[0][n], steps[1][n]) for n in steps[0])}
    everyone: list = [None] * ep
    dist.all_gather_object(everyone, mine)
    ok = True
    if rank == 0:
        stack = lambda key: np.stack([r[key] for r in everyone])  # noqa: E731
        ref = moe_reference(stack("x"), stack("w1"), stack("w2"), stack("ids"), stack("w"), stack("dy"))
        got = {n: np.stack([r["out"][n] for r in everyone]).astype(np.float64) for n in ref}
        for name, err, tol, passed in compare(got, ref, "bf16"):
            print(f"ep={ep} {name:<14} max rel err {err:.3e}  tol {tol:.1e}  {'ok' if passed else 'FAIL'}")
            ok &= passed
        same = all(r["same"] for r in everyone)
        print(f"ep={ep} second step bitwise identical: {same}")
        ok &= same
    flag = torch.tensor([int(ok)], device="cuda")
    dist.broadcast(flag, 0)
    dist.destroy_process_group()
    return 0 if int(flag) else 1


if __name__ == "__main__":
    sys.exit(main())
