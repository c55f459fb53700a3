"""Where a user's MoEFFN step spends its time outside hpmoe's persistent kernels: torch.profiler (CPU and
CUDA activities) over a few forward+backward steps of one model's expert shape, EP 1, random routing, bf16,
after warm-up; prints the ops by GPU time and by host time, and writes the Chrome trace (open it in
ui.perfetto.dev) where --trace says.

    python3 benchmarks/cuda_step_profile.py qwen3-235b-a22b:4096 [--steps 3] [--trace step.json] \
        [--expert-aligned auto|on|off]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_user_step import SHAPES, add_expert_aligned_arg, auto_choice  # noqa: E402

from hpmoe.config import make_config  # noqa: E402
from hpmoe.runtime.routing import make_routing  # noqa: E402
from hpmoe.torch import MoEFFN  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("shape", help=f"MODEL:TOKENS, MODEL one of {', '.join(SHAPES)}")
    p.add_argument("--steps", type=int, default=3, help="profiled steps (after 3 unprofiled ones)")
    p.add_argument("--trace", type=Path, help="write the Chrome trace here")
    add_expert_aligned_arg(p)
    p.add_argument("--rows", type=int, default=25, help="rows of each table")
    args = p.parse_args()
    try:
        model, tokens = args.shape.split(":")
        h, inter, E, k = SHAPES[model]
        T = int(tokens)
    except (ValueError, KeyError):
        p.error(f"shape must be MODEL:TOKENS with MODEL one of {', '.join(SHAPES)}, got {args.shape!r}")
    cfg = make_config(None, {"ep": 1, "tokens": T, "hidden": h, "inter": inter, "experts_per_rank": E, "topk": k,
                             "dtype": "bf16"})
    ids_np, w_np = make_routing(cfg, "random", 0)
    m = MoEFFN(h, inter, E, k, expert_aligned=auto_choice(args.expert_aligned))
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(T, h, device="cuda", generator=g).bfloat16().requires_grad_()
    dy = torch.randn(T, h, device="cuda", generator=g).bfloat16()
    ids = torch.from_numpy(ids_np[0]).cuda()
    tw = torch.from_numpy(w_np[0]).cuda().requires_grad_()

    def step():
        m(x, ids, tw).backward(dy)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            with record_function("user step"):
                step()
        torch.cuda.synchronize()
    averages = prof.key_averages()
    print(f"# {torch.cuda.get_device_name()} {args.shape} {args.steps} steps, "
          f"expert_aligned={m.runtime.config(T).expert_aligned}")
    print(averages.table(sort_by="cuda_time_total", row_limit=args.rows))
    print(averages.table(sort_by="cpu_time_total", row_limit=args.rows))
    if args.trace:
        prof.export_chrome_trace(str(args.trace))
    return 0


if __name__ == "__main__":
    sys.exit(main())
