"""Every GPU kernel of one user step (`y = m(x, ids, w); y.backward(dy)`) with its time, from the PyTorch
profiler's CUDA activity: what the step runs besides hpmoe's persistent kernels (plan, bind, autograd's
gradient accumulation) and how long each takes. DeepSeek-V3 expert shapes, EP 1.

    python3 benchmarks/cuda_step_kernels.py [--tokens 8192] [--steps 5]
"""
from __future__ import annotations

import argparse
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from hpmoe.torch import MoEFFN


def warm_deepseek_step(tokens: int):
    """MoEFFN with DeepSeek-V3 expert shapes (EP 1, random routing) and the step's inputs, after 3 warm-up
    steps: (module, x, topk_ids, topk_weights, dy)."""
    h, inter, E, k = 7168, 2048, 8, 8
    m = MoEFFN(h, inter, E, k)
    x = torch.randn(tokens, h, device="cuda").bfloat16().requires_grad_()
    ids = torch.argsort(torch.rand(tokens, E, device="cuda"), dim=1)[:, :k].int()
    w = torch.softmax(torch.randn(tokens, k, device="cuda"), -1).requires_grad_()
    dy = torch.randn(tokens, h, device="cuda").bfloat16()
    for _ in range(3):
        m(x, ids, w).backward(dy)
    torch.cuda.synchronize()
    return m, x, ids, w, dy


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args()
    m, x, ids, w, dy = warm_deepseek_step(args.tokens)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            m(x, ids, w).backward(dy)
        torch.cuda.synchronize()
    rows = sorted(((e.key, e.device_time_total / args.steps / 1e3, e.count // args.steps)
                   for e in prof.key_averages() if e.device_time_total > 0), key=lambda r: -r[1])
    print(f"per step, T={args.tokens}: kernel, ms, launches")
    for name, ms, n in rows:
        print(f"{ms:9.3f} ms  x{n:<3d} {name[:110]}")
    print(f"{sum(r[1] for r in rows):9.3f} ms  total GPU time per step")
    timeline(m, x, ids, w, dy)
    return 0


def timeline(m, x, ids, w, dy) -> None:
    """One step's kernels in order with start offsets and the idle gaps between them (CUDA events around
    the step give its wall time on the GPU)."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        start.record()
        m(x, ids, w).backward(dy)
        end.record()
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.device_type.name == "CUDA" and e.time_range.end > e.time_range.start),
                     key=lambda e: e.time_range.start)
    t0, prev = kernels[0].time_range.start, kernels[0].time_range.start
    print(f"one step: events {start.elapsed_time(end):.3f} ms; kernels from first start to last end "
          f"{(kernels[-1].time_range.end - t0) / 1e3:.3f} ms")
    for e in kernels:
        gap = (e.time_range.start - prev) / 1e3
        print(f"  +{(e.time_range.start - t0) / 1e3:8.3f} ms  gap {gap:6.3f}  {e.time_range.elapsed_us() / 1e3:8.3f} ms  {e.name[:70]}")
        prev = e.time_range.end


if __name__ == "__main__":
    sys.exit(main())
