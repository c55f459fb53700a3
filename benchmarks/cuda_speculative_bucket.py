"""What the speculative bucket (docs/cuda.md, "Routing beyond the bucket") costs the user's step, on one GPU:
MoEFFN's fwd+bwd (CUDA events around the whole call) with EP 1's own bucket (one launch per direction), with
`speculative=True` and a bucket the routing fits (the need agreed in the launch, the passes enqueued behind
it returning at once), and with a bucket it overflows (every forward stands down and runs as passes, the
backward recomputes each pass), alternating call by call so that drift hits all alike. The overflowed
variant never grows (HPMOE_OVERFLOW_LAG past the run): the cost of the steps between an overflow and the
bucket's growth. Medians of --repeat steps after --warmup.

    python3 benchmarks/cuda_speculative_bucket.py [--shape deepseek-v3] [--tokens 8192] [--repeat 10]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_user_step import SHAPES  # noqa: E402

from hpmoe.torch import MoEFFN  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="deepseek-v3", choices=sorted(SHAPES))
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--overflow-capacity", type=float, default=0.5,
                   help="capacity_factor of the overflowing variant (EP 1 needs T*k rows: below 1 overflows)")
    a = p.parse_args()
    os.environ["HPMOE_OVERFLOW_LAG"] = str(a.warmup + a.repeat + 2)  # the overflowed bucket never grows here
    h, inter, E, k = SHAPES[a.shape]
    T = a.tokens
    torch.manual_seed(0)
    x0 = torch.randn(T, h, device="cuda").bfloat16()
    ids = torch.argsort(torch.rand(T, E, device="cuda"), dim=1)[:, :k].int()
    w = torch.softmax(torch.randn(T, k, device="cuda"), -1)
    dy = torch.randn(T, h, device="cuda").bfloat16()
    variants = {"one launch (EP 1 bucket)": dict(speculative=False),
                "speculative, fits": dict(speculative=True, capacity_factor=1.0),
                "speculative, overflows": dict(speculative=True, capacity_factor=a.overflow_capacity)}
    mods = {name: MoEFFN(h, inter, E, k, **kw) for name, kw in variants.items()}
    for m in mods.values():
        m.load_state_dict(next(iter(mods.values())).state_dict())
    times: dict[str, list[float]] = {name: [] for name in mods}
    for i in range(a.warmup + a.repeat):
        for name, m in mods.items():
            x = x0.clone().requires_grad_()
            m.w1.grad = m.w2.grad = None
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            m(x, ids, w).backward(dy)
            end.record()
            end.synchronize()
            if i >= a.warmup:
                times[name].append(start.elapsed_time(end))
    for m in mods.values():
        m.runtime.check()
    rt = mods["speculative, overflows"].runtime
    key = next(iter(rt._all))
    print(f"{a.shape} experts, {T} tokens, EP 1, fwd+bwd ms (median of {a.repeat}); overflowing bucket C={key[1]} "
          f"rows for {T * k} needed: {len(rt.passes(key))} passes")
    base = statistics.median(times["one launch (EP 1 bucket)"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:<26} {med:8.3f} ms  ({med / base:.3f}x)  min {min(ts):.3f}")


if __name__ == "__main__":
    main()
