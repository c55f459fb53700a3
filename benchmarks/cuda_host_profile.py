"""Where the host time of one hpmoe.torch call goes (Python and launch work before control returns to the
user; the GPU runs behind it): cProfile of forward and backward after warm-up, top entries by own time.

    python3 benchmarks/cuda_host_profile.py [--tokens 8192] [--calls 20]
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_step_kernels import warm_deepseek_step  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    m, x, ids, w, dy = warm_deepseek_step(args.tokens)
    prof = cProfile.Profile()
    fwd = bwd = 0.0
    for _ in range(args.calls):
        t0 = time.perf_counter()
        prof.enable()
        y = m(x, ids, w)
        t1 = time.perf_counter()
        y.backward(dy)
        prof.disable()
        t2 = time.perf_counter()
        fwd, bwd = fwd + t1 - t0, bwd + t2 - t1
        torch.cuda.synchronize()
    print(f"host per call (profiled): fwd {fwd / args.calls * 1e3:.3f} ms, fwd+bwd {(fwd + bwd) / args.calls * 1e3:.3f} ms")
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
    parts(m, x, ids, w, args.calls)
    return 0


def parts(m, x, ids, w, calls: int) -> None:
    """Host microseconds of the pieces of a forward, each timed alone (median of `calls`)."""
    import statistics

    from hpmoe.ssc_format import Slot
    from hpmoe.torch import ops
    rt = m.runtime
    y = torch.empty_like(x)
    weights = w.detach().float().contiguous()

    def us(fn) -> float:
        t = []
        for _ in range(calls):
            t0 = time.perf_counter()
            fn()
            t.append((time.perf_counter() - t0) * 1e6)
            torch.cuda.synchronize()
        return statistics.median(t)

    def launch_only():
        lease = rt.lease(x.shape[0], ids)
        lease.group.launch(rt.rank, "fwd", torch.cuda.current_stream().cuda_stream,
                           {Slot.X: x.data_ptr(), Slot.TOPK_IDS: ids.data_ptr(), Slot.TOPK_WEIGHTS: weights.data_ptr(),
                            Slot.W1: m.w1.data_ptr(), Slot.W2: m.w2.data_ptr(), Slot.Y: y.data_ptr()},
                           plan=True, timeout_s=rt.timeout_s)
        lease.release()

    with torch.no_grad():
        rows = {"poll": lambda: rt.poll(), "lease+release": lambda: rt.lease(x.shape[0], ids).release(),
                "current_stream": lambda: torch.cuda.current_stream(rt.device).cuda_stream,
                "lease+launch+release": launch_only,
                "custom op fwd (no grad)": lambda: ops.moe_ffn_fwd(x.detach(), ids, w.detach(), m.w1.detach(),
                                                                   m.w2.detach(), rt.id, False),
                "module call (no grad)": lambda: m(x.detach(), ids, w.detach())}
        for name, fn in rows.items():
            print(f"{name:28s} {us(fn):8.1f} us")


if __name__ == "__main__":
    sys.exit(main())
