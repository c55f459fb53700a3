"""The user's step, as a PyTorch user calls it, on one GPU (EP 1): `y = m(x, topk_ids, topk_weights)` and
`y.backward(dy)`, timed with CUDA events around the whole call (host work, plan, launches, casts included),
for hpmoe.torch.MoEFFN and the plain PyTorch path (gather, torch._grouped_mm, SwiGLU, torch._grouped_mm,
scatter, autograd) holding the same parameters, side by side in one run. Beside them: hpmoe's kernels in the
same calls (CUDA events around each persistent kernel inside the launches: "its kernels"), so the
user-facing overhead is the difference, and the same kernels run alone through CudaGroup.run ("alone"); and the GMM tiles' throughput inside the loop (forward GEMM FLOPs
over the span of the traced forward's GMM tasks) against torch._grouped_mm alone at the same shape.
Default: DeepSeek-V3 expert shapes (h 7168, I 2048, 8 experts, top-8, bf16); --shapes sweeps other models'.

    python3 benchmarks/cuda_user_step.py [--tokens 4096 8192] [--routing balanced skewed] [--json-out F]
    python3 benchmarks/cuda_user_step.py --shapes deepseek-v3:8192 qwen3-30b-a3b:8192 mixtral-8x7b:4096 \
        deepseek-v3:1024 deepseek-v3:4096 --routing random        # the shapes sweep (issue 16)

Ratio = PyTorch time / hpmoe time (above 1: hpmoe faster). Medians of --repeat timed calls after warm-up.
Single calls with the GPU idle between them run both paths at one clock: they compare cycles. A training loop
keeps an H200 at its power cap, where the two paths run different clocks: cuda_sustained_step.py measures that.
Weight gradients accumulate over the timed steps (as over micro-steps) in .grad, or with --grad-buffer main_grad
in Megatron-style fp32 buffers, or with --grad-buffer none every step starts with no gradients (the loop of
optimizer.zero_grad(), whose default sets them to None: autograd keeps each step's gradient, adding nothing);
--fuse-wgrad-accumulation makes MoEFFN's kernel do the add (hpmoe.torch.wgrad).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_torch_path import moe_ffn_torch  # noqa: E402

from ep_traffic import gemm_flops  # noqa: E402
from user_step_table import table  # noqa: E402

from hpmoe.config import make_config  # noqa: E402
from hpmoe.cuda.group import CudaGroup  # noqa: E402
from hpmoe.runtime.routing import make_routing  # noqa: E402
from hpmoe.ssc_format import FUSED_SWIGLU_GROUP, TaskType  # noqa: E402
from hpmoe.torch import MoEFFN  # noqa: E402


# Expert shapes of public MoE models (h, I, local experts, top-k; all of a layer's routed experts on one GPU),
# from each model's config.json (hidden_size, moe_intermediate_size or intermediate_size, the routed experts,
# num_experts_per_tok): issue 16's table, then the other models it asks us to try. gpt-oss's experts use a
# clamped SwiGLU with biases; only their shape is measured here.
SHAPES = {"deepseek-v3": (7168, 2048, 8, 8), "qwen3-30b-a3b": (2048, 768, 16, 8), "mixtral-8x7b": (4096, 14336, 8, 2),
          "mixtral-8x22b": (6144, 16384, 8, 2), "dbrx": (6144, 10752, 16, 4), "qwen3-235b-a22b": (4096, 1536, 128, 8),
          "deepseek-v2-lite": (2048, 1408, 64, 6), "qwen1.5-moe-a2.7b": (2048, 1408, 60, 4),
          "olmoe-1b-7b": (2048, 1024, 64, 8), "gpt-oss-20b": (2880, 2880, 32, 4)}


def add_expert_aligned_arg(p: argparse.ArgumentParser) -> None:
    """--expert-aligned auto|on|off (the benchmarks' shared option); auto_choice maps it for MoEFFN."""
    p.add_argument("--expert-aligned", choices=["auto", "on", "off"], default="auto",
                   help="MoEFFN(expert_aligned=...): each expert's rows on a row-tile boundary (auto: its default)")


def add_first_gmm_pool_arg(p: argparse.ArgumentParser) -> None:
    """--first-gmm-pool auto|on|off (shared with cuda_step_kernels.py); auto_choice maps it for MoEFFN."""
    p.add_argument("--first-gmm-pool", choices=["auto", "on", "off"], default="auto",
                   help="MoEFFN(first_gmm_pool=...): under mixed queues the first GMM claimed in panel order too")


def auto_choice(choice: str) -> bool | None:
    """An auto|on|off option as MoEFFN takes it: None (its per-shape default), True or False."""
    return {"auto": None, "on": True, "off": False}[choice]


def give_main_grads(params, fused: bool) -> None:
    """Megatron-style fp32 gradient buffers: `p.main_grad`, which a fused MoEFFN adds to in its kernel; where
    gradients arrive through autograd instead, a post-accumulate hook adds .grad to it and drops .grad, as
    Megatron's DDP does (the add the fused path saves)."""
    for p in params:
        p.main_grad = torch.zeros(p.shape, dtype=torch.float32, device=p.device)
        if not fused:
            def move(q):
                q.main_grad.add_(q.grad)
                q.grad = None
            p.register_post_accumulate_grad_hook(move)


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
        fwd_ms, bwd_ms, stamps, sched = time_group_kernels(g, repeat)
    gmm = np.isin(sched.tasks["task_type"], (int(TaskType.GMM), int(TaskType.GMM_SWIGLU)))  # the forward's GMM1/GMM2
    span_ms = float(stamps[gmm, 1].max() - stamps[gmm, 0].min()) / 1e6
    return fwd_ms, bwd_ms, span_ms


def time_group_kernels(g: CudaGroup, repeat: int):
    """Rank 0's median fwd and bwd persistent-kernel ms over `repeat` launches after one, then one traced
    forward: (fwd_ms, bwd_ms, its per-task stamps, the forward schedule)."""
    fwd, bwd = [], []
    for i in range(repeat + 1):
        f = g.run("fwd", timeout_s=60)[0]
        b = g.run("bwd", timeout_s=60)[0]
        if i:
            fwd.append(f)
            bwd.append(b)
    g.run("fwd", timeout_s=60, trace=True)
    sched = next(s for s in g.schedules if s.direction_name == "fwd" and s.rank == 0)
    return statistics.median(fwd), statistics.median(bwd), g.trace(0, "fwd"), sched


def step_tensors(m: MoEFFN, tokens: int, ids_np: np.ndarray, w_np: np.ndarray, g: torch.Generator):
    """A step's inputs on the GPU (x and dy drawn from g; rank 0's topk ids and weights), and the PyTorch path's
    own copies of m's parameters (its own leaves, so gradients do not mix): x, dy, ids, topk_weights, w1, w2."""
    h = m.w1.shape[1]
    x = torch.randn(tokens, h, device="cuda", generator=g).bfloat16().requires_grad_()
    dy = torch.randn(tokens, h, device="cuda", generator=g).bfloat16()
    ids = torch.from_numpy(ids_np[0]).cuda()
    tw = torch.from_numpy(w_np[0]).cuda().requires_grad_()
    w1t, w2t = m.w1.detach().clone().requires_grad_(), m.w2.detach().clone().requires_grad_()
    return x, dy, ids, tw, w1t, w2t


def bench(shape: str, tokens: int, routing: str, args) -> dict:
    h, inter, E, k = SHAPES[shape]
    cfg = make_config(None, {"ep": 1, "tokens": tokens, "hidden": h, "inter": inter, "experts_per_rank": E,
                             "topk": k, "dtype": "bf16"})
    ids_np, w_np = make_routing(cfg, routing, 0)
    m = MoEFFN(h, inter, E, k, wgrad_tile=args.wgrad_tile, wgrad_n_block=args.wgrad_n_block,
               fuse_swiglu=args.fuse_swiglu and inter % FUSED_SWIGLU_GROUP == 0,
               expert_aligned=auto_choice(args.expert_aligned),
               fuse_wgrad_accumulation=args.fuse_wgrad_accumulation, num_aiv=args.num_aiv,
               first_gmm_pool=auto_choice(args.first_gmm_pool))
    g = torch.Generator(device="cuda").manual_seed(0)
    x, dy, ids, tw, w1t, w2t = step_tensors(m, tokens, ids_np, w_np, g)
    ids64 = ids.long()
    if args.grad_buffer == "main_grad":
        give_main_grads((m.w1, m.w2), fused=args.fuse_wgrad_accumulation)
        give_main_grads((w1t, w2t), fused=False)

    def hp_fwd():
        return m(x, ids, tw)

    fresh = args.grad_buffer == "none"

    def hp_step():
        if fresh:  # host work only: the caching allocator takes the old gradients back
            x.grad = tw.grad = m.w1.grad = m.w2.grad = None
        m(x, ids, tw).backward(dy)

    def pt_fwd():
        return moe_ffn_torch(x, w1t, w2t, ids64, tw)

    def pt_step():
        if fresh:
            x.grad = tw.grad = w1t.grad = w2t.grad = None
        moe_ffn_torch(x, w1t, w2t, ids64, tw).backward(dy)

    mcfg = m.runtime.config(tokens)
    row = {"shape": shape, "tokens": tokens, "routing": routing, "wgrad_tile": mcfg.wgrad_tile,
           "schedule": ("pipelines" if mcfg.row_pipelines else "mixed") + ("+pool" if mcfg.claim_pool else "")
           + (f" n{mcfg.gmm_n_block}" if mcfg.gmm_n_block else "")
           + (f" dW-n{mcfg.wgrad_n_block}" if mcfg.wgrad_n_block else "") + (" fused" if mcfg.fuse_swiglu else "")
           + (" aligned" if mcfg.expert_aligned else "") + (" gmm1-pool" if mcfg.first_gmm_pool else "")
           + f" {mcfg.num_aic}+{mcfg.num_aiv}" + (" wgrad-acc" if args.fuse_wgrad_accumulation else "")
           + (" main_grad" if args.grad_buffer == "main_grad" else "")
           + (" fresh-grads" if args.grad_buffer == "none" else "")}
    row["torch_fwd_ms"] = timed(pt_fwd, args.repeat)
    row["hpmoe_fwd_ms"] = timed(hp_fwd, args.repeat)
    # Forward+backward: the two paths alternate call by call (clock and temperature drift hit both alike);
    # hpmoe's two persistent kernels are timed inside the same calls (events in the launches).
    m.runtime.time_kernels = True
    torch_steps, steps, kernels = [], [], []
    for i in range(args.repeat + 2):
        for fn, out in ((pt_step, torch_steps), (hp_step, steps)):
            torch.cuda.synchronize()
            s0, s1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s0.record()
            fn()
            s1.record()
            torch.cuda.synchronize()
            if i >= 2:
                out.append(s0.elapsed_time(s1))
        if i >= 2:
            kernels.append(sum(m.runtime.kernel_ms().values()))
    m.runtime.time_kernels = False
    row["torch_fwdbwd_ms"] = statistics.median(torch_steps)
    row["hpmoe_fwdbwd_ms"] = statistics.median(steps)
    row["same_call_kernels_ms"] = statistics.median(kernels)
    row["same_call_user_over_kernels"] = statistics.median([a / b for a, b in zip(steps, kernels)])
    # Host time of a call (the Python and launch work before control returns; the GPU runs behind it).
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    y = hp_fwd()
    t1 = time.perf_counter()
    y.backward(dy)
    t2 = time.perf_counter()
    torch.cuda.synchronize()
    row["host_fwd_ms"], row["host_bwd_ms"] = (t1 - t0) * 1e3, (t2 - t1) * 1e3
    kf, kb, gmm_span = kernels_alone(m, tokens, ids_np[0], w_np[0], args.repeat)
    row["kernel_fwd_ms"], row["kernel_fwdbwd_ms"] = kf, kf + kb  # a separate group, timed after the steps
    # torch._grouped_mm alone: the forward's two GEMMs over this routing's groups.
    rows = tokens * k
    offs = torch.cumsum(torch.bincount(ids.reshape(-1).long(), minlength=E), 0).to(torch.int32)
    xs = torch.randn(rows, h, device="cuda", generator=g).bfloat16()
    a = torch.randn(rows, inter, device="cuda", generator=g).bfloat16()
    gmm_ms = timed(lambda: (torch._grouped_mm(xs, m.w1.detach(), offs=offs), torch._grouped_mm(a, m.w2.detach(), offs=offs)),
                   args.repeat)
    flops = gemm_flops(rows, h, inter, False)
    row["gmm_in_loop_tflops"], row["grouped_mm_tflops"] = flops / gmm_span / 1e9, flops / gmm_ms / 1e9
    row["gmm_ratio"] = row["gmm_in_loop_tflops"] / row["grouped_mm_tflops"]
    del xs, a
    m.runtime.check()
    with torch.no_grad():
        a, b = m(x, ids, tw).float(), moe_ffn_torch(x, w1t, w2t, ids64, tw).float()
        row["y_rel_diff_vs_torch"] = float((a - b).norm() / b.norm())
    row["heap_gib"] = m.runtime.heap_bytes() / 2 ** 30  # every heap generation this runtime made
    row["ratio_user_fwd"] = row["torch_fwd_ms"] / row["hpmoe_fwd_ms"]
    row["ratio_user_fwdbwd"] = row["torch_fwdbwd_ms"] / row["hpmoe_fwdbwd_ms"]
    row["ratio_kernels_fwdbwd"] = row["torch_fwdbwd_ms"] / row["same_call_kernels_ms"]
    row["user_over_kernels"] = row["same_call_user_over_kernels"]
    del m
    torch.cuda.empty_cache()
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, nargs="+", default=[4096, 8192], help="DeepSeek-V3 shapes at these tokens")
    p.add_argument("--shapes", nargs="+", metavar="MODEL:TOKENS",
                   help=f"instead of --tokens: expert shapes of {', '.join(SHAPES)} at a token count each")
    p.add_argument("--routing", nargs="+", default=["balanced", "skewed"], choices=["balanced", "random", "skewed"])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--wgrad-tile", type=int, default=0, help="output rows per weight-gradient tile (0: default)")
    p.add_argument("--wgrad-n-block", type=int, default=None,
                   help="output columns per weight-gradient task (0: whole widths; default: MoEFFN's, wgrad_split.py)")
    p.add_argument("--fuse-swiglu", action="store_true",
                   help="MoEFFN(fuse_swiglu=True) where I is a multiple of 128 (else the default schedule)")
    add_expert_aligned_arg(p)
    add_first_gmm_pool_arg(p)
    p.add_argument("--fuse-wgrad-accumulation", action="store_true",
                   help="MoEFFN(fuse_wgrad_accumulation=True): its kernel adds dW to .grad / main_grad (the PyTorch "
                        "path's gradients arrive through autograd's add)")
    p.add_argument("--grad-buffer", choices=["grad", "main_grad", "none"], default="grad",
                   help="where both paths accumulate weight gradients: .grad (autograd), or fp32 main_grad "
                        "(Megatron's buffers: a hook adds .grad to it where the add is not fused); none: every "
                        "step starts without gradients (optimizer.zero_grad()'s default), nothing is added")
    p.add_argument("--num-aiv", type=int, default=None,
                   help="vector-queue worker blocks (default: MoEFFN's per-shape choice); the rest run cube queues")
    p.add_argument("--json-out", type=Path)
    args = p.parse_args()
    commit = os.environ.get("HPMOE_COMMIT") or subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                                             capture_output=True, text=True).stdout.strip()
    print(f"# {torch.cuda.get_device_name()}  commit {commit or '?'}  torch {torch.__version__}", flush=True)
    cases = [("deepseek-v3", t) for t in args.tokens]
    if args.shapes:
        try:
            cases = [(sp.split(":")[0], int(sp.split(":")[1])) for sp in args.shapes]
        except (IndexError, ValueError):
            p.error(f"--shapes takes MODEL:TOKENS, got {args.shapes}")
        bad = [m for m, _ in cases if m not in SHAPES]
        if bad:
            p.error(f"unknown model {bad[0]!r}; choose from {', '.join(SHAPES)}")
    rows = []
    for shape, tokens in cases:
        for routing in args.routing:
            r = bench(shape, tokens, routing, args)
            rows.append(r)
            print(f"{shape} T={tokens:5d} {routing:8s} {r['schedule']} wgrad {r['wgrad_tile']} fwd+bwd: torch {r['torch_fwdbwd_ms']:7.2f}  hpmoe {r['hpmoe_fwdbwd_ms']:7.2f}"
                  f"  its kernels {r['same_call_kernels_ms']:7.2f} (alone {r['kernel_fwdbwd_ms']:.2f}) ms | ratio user {r['ratio_user_fwdbwd']:.3f}"
                  f" kernels {r['ratio_kernels_fwdbwd']:.3f} | user/kernels {r['user_over_kernels']:.3f} | fwd: torch"
                  f" {r['torch_fwd_ms']:.2f} hpmoe {r['hpmoe_fwd_ms']:.2f} ({r['ratio_user_fwd']:.3f}) | y diff"
                  f" {r['y_rel_diff_vs_torch']:.1e} | host fwd {r['host_fwd_ms']:.2f} bwd {r['host_bwd_ms']:.2f} ms | GMM in loop"
                  f" {r['gmm_in_loop_tflops']:.0f} vs _grouped_mm {r['grouped_mm_tflops']:.0f} TFLOP/s ({r['gmm_ratio']:.2f})",
                  flush=True)
    print("\n" + table(rows))
    if args.json_out:
        args.json_out.write_text(json.dumps({"commit": commit, "device": torch.cuda.get_device_name(), "rows": rows},
                                            indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
