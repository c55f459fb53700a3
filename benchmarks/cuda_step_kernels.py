"""Every GPU kernel of one user step (`y = m(x, ids, w); y.backward(dy)`) with its time, from the PyTorch
profiler's CUDA activity: what the step runs besides hpmoe's persistent kernels (plan, bind, autograd's
gradient accumulation) and how long each takes, then one step's timeline with the GPU's idle gaps. EP 1,
random routing; `--path torch` profiles the PyTorch path (cuda_torch_path.py) at the same shape.

    python3 benchmarks/cuda_step_kernels.py [--shape deepseek-v3:8192] [--path hpmoe|torch] [--steps 5]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_torch_path import moe_ffn_torch  # noqa: E402
from cuda_user_step import SHAPES, add_first_gmm_pool_arg, auto_choice  # noqa: E402

from hpmoe.torch import MoEFFN  # noqa: E402


def warm_deepseek_step(tokens: int):
    """warm_step at DeepSeek-V3 expert shapes (cuda_host_profile.py)."""
    return warm_step("deepseek-v3", tokens, "hpmoe")


def warm_step(model: str, tokens: int, path: str, first_gmm_pool: bool | None = None, num_aiv: int | None = None,
              linear_layout: bool = False, act_n_block: str | None = None, wgrad_n_block: int | None = None,
              wgrad_tile: int | None = None, tile_m: int | None = None):
    """A step function of `path` at `model`'s expert shapes (EP 1, random routing) and the step's inputs,
    after 3 warm-up steps: (module or step callable, x, topk_ids, topk_weights, dy). The module is called
    as m(x, ids, w). `linear_layout`: the weights stored as nn.Linear stores them ([E, 2I, h], [E, h, I]) and
    given as transpose views, which the op reads in place (a schedule of its own, kConfigWeightsTransposed).
    `act_n_block` (N or "gmm") replaces SwiGLU's column block in MoEFFN's schedule, `wgrad_n_block` the
    weight-gradient units' (columns, 0: whole widths), `wgrad_tile` their rows, `tile_m` the row tiles' rows."""
    h, inter, E, k = SHAPES[model]
    m = MoEFFN(h, inter, E, k, first_gmm_pool=first_gmm_pool, num_aiv=num_aiv, tile_m=tile_m)
    if act_n_block is not None:
        from hpmoe.cuda.tune import act_block_of
        pin_config(m.runtime, lambda cfg: cfg.replace(act_n_block=act_block_of(cfg, act_n_block)))
    if wgrad_n_block is not None:
        pin_config(m.runtime, lambda cfg: cfg.replace(wgrad_n_block=wgrad_n_block))
    if wgrad_tile is not None:
        pin_config(m.runtime, lambda cfg: cfg.replace(wgrad_tile=wgrad_tile))
    if linear_layout:
        for name in ("w1", "w2"):
            stored = getattr(m, name).detach().transpose(1, 2).contiguous()
            setattr(m, name, torch.nn.Parameter(stored.transpose(1, 2)))
    if path == "torch":  # the same parameters as the PyTorch path's own leaves
        w1, w2 = m.w1.detach().clone().requires_grad_(), m.w2.detach().clone().requires_grad_()
        m = lambda x, ids, w: moe_ffn_torch(x, w1, w2, ids.long(), w)  # noqa: E731
    x = torch.randn(tokens, h, device="cuda").bfloat16().requires_grad_()
    ids = torch.argsort(torch.rand(tokens, E, device="cuda"), dim=1)[:, :k].int()
    w = torch.softmax(torch.randn(tokens, k, device="cuda"), -1).requires_grad_()
    dy = torch.randn(tokens, h, device="cuda").bfloat16()
    for _ in range(3):
        m(x, ids, w).backward(dy)
    torch.cuda.synchronize()
    return m, x, ids, w, dy


def pin_config(runtime, change) -> None:
    """Every schedule `runtime` makes from now on takes `change(cfg)` of MoEFFN's config (one field replaced),
    the rest of MoEFFN's choice unchanged: an A/B of that one field on the user's schedule."""
    make = runtime._make_config

    def pinned(*args):
        return change(make(*args))
    runtime._make_config = pinned


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="deepseek-v3:8192", help=f"MODEL:TOKENS, MODEL one of {', '.join(SHAPES)}")
    p.add_argument("--path", choices=("hpmoe", "torch"), default="hpmoe")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--num-aiv", type=int, default=None, help="MoEFFN(num_aiv=...): vector-queue blocks (default: its rule)")
    p.add_argument("--weights-layout", choices=("stored", "linear"), default="stored",
                   help="linear: weights stored [E, 2I, h] / [E, h, I] (nn.Linear's), given as transpose views")
    p.add_argument("--act-n-block", default=None, metavar="N|gmm",
                   help="SwiGLU's column block in MoEFFN's schedule (default: its rule, whole rows); gmm: the GMM "
                        "column block in force, as `hpmoe tune --backend cuda` tries it")
    p.add_argument("--wgrad-n-block", type=int, default=None, metavar="N",
                   help="columns per weight-gradient unit in MoEFFN's schedule (default: its rule, 1024 or wider "
                        "where experts get few rows; 0: whole widths)")
    p.add_argument("--wgrad-tile", type=int, default=None, metavar="N",
                   help="rows per weight-gradient unit (a multiple of 128; default: MoEFFN's, 128 where it divides h "
                        "and I)")
    p.add_argument("--tile-m", type=int, default=None, metavar="N",
                   help="MoEFFN(tile_m=N): rows per row tile (default 128; 256 for the tall GMM tile's build)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="set an environment variable before the op compiles its schedules (a schedule experiment's "
                        "switch; session 28's HPMOE_EXPERIMENT_SIDE_ORDER, reverted since), so that "
                        "cuda_op_build_ab.sh entries can differ in it")
    add_first_gmm_pool_arg(p)
    args = p.parse_args()
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            p.error(f"--env: expected NAME=VALUE, got {item!r}")
        os.environ[name] = value
    model, tokens = args.shape.split(":")
    if model not in SHAPES:
        p.error(f"--shape: unknown model {model!r} (one of {', '.join(SHAPES)})")
    m, x, ids, w, dy = warm_step(model, int(tokens), args.path, auto_choice(args.first_gmm_pool), args.num_aiv,
                                 args.weights_layout == "linear", args.act_n_block, args.wgrad_n_block,
                                 args.wgrad_tile, args.tile_m)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            m(x, ids, w).backward(dy)
        torch.cuda.synchronize()
    rows = sorted(((e.key, e.device_time_total / args.steps / 1e3, e.count // args.steps)
                   for e in prof.key_averages() if e.device_time_total > 0), key=lambda r: -r[1])
    print(f"{args.path} per step, {args.shape}: kernel, ms, launches")
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
    if not kernels:  # under Nsight Compute the profiler sees no kernel activity
        print("one step: no CUDA kernel activity recorded (run under a profiler?)")
        return
    t0, prev = kernels[0].time_range.start, kernels[0].time_range.start
    print(f"one step: events {start.elapsed_time(end):.3f} ms; kernels from first start to last end "
          f"{(kernels[-1].time_range.end - t0) / 1e3:.3f} ms")
    for e in kernels:
        gap = (e.time_range.start - prev) / 1e3
        print(f"  +{(e.time_range.start - t0) / 1e3:8.3f} ms  gap {gap:6.3f}  {e.time_range.elapsed_us() / 1e3:8.3f} ms  {e.name[:70]}")
        prev = e.time_range.end


if __name__ == "__main__":
    sys.exit(main())
