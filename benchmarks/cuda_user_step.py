"""The user's step, as a PyTorch user calls it, on one GPU (EP 1): `y = m(x, topk_ids, topk_weights)` and
`y.backward(dy)`, timed with CUDA events around the whole call (host work, plan, launches, casts included),
for hpmoe.torch.MoEFFN and the plain PyTorch path (gather, torch._grouped_mm, SwiGLU, torch._grouped_mm,
scatter, autograd) holding the same parameters, side by side in one run. Beside them: hpmoe's kernels alone
(the persistent kernels of the same shape through CudaGroup.run, CUDA events around each kernel), so the
user-facing overhead is the difference. DeepSeek-V3 expert shapes (h 7168, I 2048, 8 experts, top-8, bf16).

    python3 benchmarks/cuda_user_step.py [--tokens 4096 8192] [--routing balanced skewed] [--json-out F]

Ratio = PyTorch time / hpmoe time (above 1: hpmoe faster). Medians of --repeat timed calls after warm-up.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_torch_path import moe_ffn_torch  # noqa: E402

from hpmoe.config import make_config  # noqa: E402
from hpmoe.cuda.group import CudaGroup  # noqa: E402
from hpmoe.runtime.routing import make_routing  # noqa: E402
from hpmoe.torch import MoEFFN  # noqa: E402


def timed(fn, repeat: int, warmup: int = 2) -> float:
    """Median ms of fn() with CUDA events around each call, the GPU idle before each (so a host-side stall
    inside the call shows in the time, as it does in a user's step)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def kernels_alone(m: MoEFFN, tokens: int, ids: np.ndarray, weights: np.ndarray, repeat: int) -> tuple[float, float]:
    """Median fwd and bwd persistent-kernel ms of the same config (the module's bucket and workers)."""
    cfg = m.runtime.config(tokens)
    with CudaGroup(cfg, [torch.cuda.current_device()]) as g:
        h, I, E = cfg.hidden, cfg.inter, cfg.experts_per_rank
        rng = np.random.default_rng(1)
        bf16 = lambda a: torch.from_numpy(a.astype(np.float32)).bfloat16().view(torch.int16).numpy().view(np.uint16)  # noqa: E731
        g.load_rank(0, bf16(rng.standard_normal((tokens, h))), bf16(rng.standard_normal((E, h, 2 * I)) * h ** -0.5),
                    bf16(rng.standard_normal((E, I, h)) * I ** -0.5), bf16(rng.standard_normal((tokens, h))),
                    ids, weights)
        fwd, bwd = [], []
        for i in range(repeat + 1):
            f = g.run("fwd", timeout_s=60)[0]
            b = g.run("bwd", timeout_s=60)[0]
            if i:
                fwd.append(f)
                bwd.append(b)
    return statistics.median(fwd), statistics.median(bwd)


def bench(tokens: int, routing: str, args) -> dict:
    cfg = make_config("deepseek-v3", {"ep": 1, "tokens": tokens})
    ids_np, w_np = make_routing(cfg, routing, 0)
    h, inter, E, k = cfg.hidden, cfg.inter, cfg.experts_per_rank, cfg.topk
    m = MoEFFN(h, inter, E, k, wgrad_tile=args.wgrad_tile)
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(tokens, h, device="cuda", generator=g).bfloat16().requires_grad_()
    dy = torch.randn(tokens, h, device="cuda", generator=g).bfloat16()
    ids = torch.from_numpy(ids_np[0]).cuda()
    tw = torch.from_numpy(w_np[0]).cuda().requires_grad_()
    # The PyTorch path holds the same parameters (its own leaves, so gradients do not mix).
    w1t, w2t = m.w1.detach().clone().requires_grad_(), m.w2.detach().clone().requires_grad_()
    ids64 = ids.long()

    def hp_fwd():
        return m(x, ids, tw)

    def hp_step():
        m(x, ids, tw).backward(dy)

    def pt_fwd():
        return moe_ffn_torch(x, w1t, w2t, ids64, tw)

    def pt_step():
        moe_ffn_torch(x, w1t, w2t, ids64, tw).backward(dy)

    row = {"tokens": tokens, "routing": routing, "wgrad_tile": m.runtime.config(tokens).wgrad_tile}
    row["torch_fwd_ms"] = timed(pt_fwd, args.repeat)
    row["torch_fwdbwd_ms"] = timed(pt_step, args.repeat)
    row["hpmoe_fwd_ms"] = timed(hp_fwd, args.repeat)
    row["hpmoe_fwdbwd_ms"] = timed(hp_step, args.repeat)
    # Host time of a call (the Python and launch work before control returns; the GPU runs behind it).
    import time
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    y = hp_fwd()
    t1 = time.perf_counter()
    y.backward(dy)
    t2 = time.perf_counter()
    torch.cuda.synchronize()
    row["host_fwd_ms"], row["host_bwd_ms"] = (t1 - t0) * 1e3, (t2 - t1) * 1e3
    kf, kb = kernels_alone(m, tokens, ids_np[0], w_np[0], args.repeat)
    row["kernel_fwd_ms"], row["kernel_fwdbwd_ms"] = kf, kf + kb
    m.runtime.check()
    with torch.no_grad():
        a, b = m(x, ids, tw).float(), moe_ffn_torch(x, w1t, w2t, ids64, tw).float()
        row["y_rel_diff_vs_torch"] = float((a - b).norm() / b.norm())
    row["ratio_user_fwd"] = row["torch_fwd_ms"] / row["hpmoe_fwd_ms"]
    row["ratio_user_fwdbwd"] = row["torch_fwdbwd_ms"] / row["hpmoe_fwdbwd_ms"]
    row["ratio_kernels_fwdbwd"] = row["torch_fwdbwd_ms"] / row["kernel_fwdbwd_ms"]
    row["user_over_kernels"] = row["hpmoe_fwdbwd_ms"] / row["kernel_fwdbwd_ms"]
    del m
    torch.cuda.empty_cache()
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, nargs="+", default=[4096, 8192])
    p.add_argument("--routing", nargs="+", default=["balanced", "skewed"], choices=["balanced", "random", "skewed"])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--wgrad-tile", type=int, default=0, help="output rows per weight-gradient tile (0: default)")
    p.add_argument("--json-out", type=Path)
    args = p.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"# {torch.cuda.get_device_name()}  commit {commit or '?'}  torch {torch.__version__}", flush=True)
    rows = []
    for tokens in args.tokens:
        for routing in args.routing:
            r = bench(tokens, routing, args)
            rows.append(r)
            print(f"T={tokens:5d} {routing:8s} wgrad {r['wgrad_tile']} fwd+bwd: torch {r['torch_fwdbwd_ms']:7.2f}  hpmoe {r['hpmoe_fwdbwd_ms']:7.2f}"
                  f"  kernels {r['kernel_fwdbwd_ms']:7.2f} ms | ratio user {r['ratio_user_fwdbwd']:.3f}"
                  f" kernels {r['ratio_kernels_fwdbwd']:.3f} | user/kernels {r['user_over_kernels']:.3f} | fwd: torch"
                  f" {r['torch_fwd_ms']:.2f} hpmoe {r['hpmoe_fwd_ms']:.2f} ({r['ratio_user_fwd']:.3f}) | y diff"
                  f" {r['y_rel_diff_vs_torch']:.1e} | host fwd {r['host_fwd_ms']:.2f} bwd {r['host_bwd_ms']:.2f} ms",
                  flush=True)
    print("\n| tokens, routing | PyTorch fwd+bwd | MoEFFN fwd+bwd | its kernels | ratio as the user sees it "
          "| ratio of the kernels | MoEFFN / kernels | fwd ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['tokens']} {r['routing']} | {r['torch_fwdbwd_ms']:.2f} ms | {r['hpmoe_fwdbwd_ms']:.2f} ms | "
              f"{r['kernel_fwdbwd_ms']:.2f} ms | {r['ratio_user_fwdbwd']:.2f} | {r['ratio_kernels_fwdbwd']:.2f} | "
              f"{r['user_over_kernels']:.3f} | {r['ratio_user_fwd']:.2f} |")
    if args.json_out:
        args.json_out.write_text(json.dumps({"commit": commit, "device": torch.cuda.get_device_name(), "rows": rows},
                                            indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
