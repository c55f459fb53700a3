"""The user's step at EP N (issue 19), one process per GPU under torchrun: `y = m(x, topk_ids, topk_weights)`
and `y.backward(dy)` of hpmoe.torch.MoEFFN against the PyTorch expert-parallel path (NCCL all_to_all_single,
torch._grouped_mm, autograd: benchmarks/cuda_ep_torch.py) holding the same parameters, the two alternating
call by call, CUDA events around each whole call, the slowest rank's time. Beside them: MoEFFN's persistent
kernels inside the same calls ("its kernels"; a forward or backward whose routing outgrew the bucket from its
launch to its last pass). DeepSeek-V3 expert shapes by default (h 7168, I 2048, 8 local experts, top-8: 256
experts over 32 GPUs); `--model` takes another model of cuda_user_step.SHAPES, whose routed experts are then
split over the N GPUs (Mixtral-8x7B at EP 2: 4 a GPU; Qwen3-30B-A3B keeps its 16 a GPU, a slice of 128). The
routing generator and seed of the other EP benchmarks. Ratio = PyTorch / hpmoe (above 1: faster).

    torchrun --nproc_per_node 4 benchmarks/cuda_ep_user_step.py --tokens 4096 8192 --routing balanced skewed
    ... --model mixtral-8x7b qwen3-30b-a3b     (rows for each model, in one run)
    ... --bucket speculative|agreed|sync-free    (MoEFFN's bucket at EP > 1; docs/cuda.md)

Weight gradients start every step as None in both paths (optimizer.zero_grad()'s default), so neither pays an
accumulation add. Needs one GPU per rank (NCCL); rank 0 prints one JSON line per row, then a table.

Per GPU (ep_traffic.py, from the routing): GEMM TFLOP/s of each path's step (the mean rank's rows over the slowest
rank's time) and the link GB/s hpmoe's step sends out of a GPU on average. The perfect-overlap bound
(--ep1-bound, on by default): MoEFFN at EP 1 on every GPU at once, each alone in its group, at the same tokens a
GPU and balanced routing (the same rows a GPU as balanced EP N, no communication); "of the bound" = its step time
over the EP N step's (1.0: the exchange costs nothing).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_ep_torch import moe_ep, slowest, timed_call  # noqa: E402
from cuda_user_step import SHAPES  # noqa: E402
from ep_traffic import per_gpu  # noqa: E402

from hpmoe.config import make_config  # noqa: E402
from hpmoe.runtime.routing import make_routing  # noqa: E402
from hpmoe.torch import MoEFFN  # noqa: E402

BUCKETS = {"speculative": dict(), "agreed": dict(speculative=False), "sync-free": dict(sync_free=True)}


# Models other than DeepSeek-V3 (its own preset, 8 of 256) whose SHAPES entry is one GPU's slice of many more
# routed experts (Qwen3-30B-A3B: 16 of 128): every GPU keeps that slice at any EP, as each GPU of a larger
# deployment holds it.
SLICED = {"qwen3-30b-a3b"}


def model_config(model: str, ep: int, tokens: int):
    """The expert shape at EP `ep`: DeepSeek-V3 keeps its 8 local experts (the paper's and issue 19's case) and
    Qwen3-30B-A3B its 16; the other models split their routed experts over the GPUs."""
    if model == "deepseek-v3":
        return make_config("deepseek-v3", {"ep": ep, "tokens": tokens})
    h, inter, experts, k = SHAPES[model]
    if model in SLICED:
        experts *= ep
    if experts % ep:
        raise SystemExit(f"cuda_ep_user_step.py: {model}'s {experts} experts do not split over {ep} GPUs")
    return make_config(None, {"ep": ep, "tokens": tokens, "hidden": h, "inter": inter, "dtype": "bf16",
                              "experts_per_rank": experts // ep, "topk": k})


def bench(model: str, tokens: int, routing: str, args, rank: int, ep: int) -> dict:
    cfg = model_config(model, ep, tokens)
    ids, weights = make_routing(cfg, routing, 0)
    h, inter, E, k = cfg.hidden, cfg.inter, cfg.experts_per_rank, cfg.topk
    m = MoEFFN(h, inter, E, k, **BUCKETS[args.bucket])
    g = torch.Generator(device="cuda").manual_seed(rank)
    with torch.no_grad():
        m.w1.copy_(torch.randn(E, h, 2 * inter, device="cuda", generator=g) * h ** -0.5)
        m.w2.copy_(torch.randn(E, inter, h, device="cuda", generator=g) * inter ** -0.5)
    w1t, w2t = m.w1.detach().clone().requires_grad_(), m.w2.detach().clone().requires_grad_()
    x = torch.randn(tokens, h, device="cuda", generator=g).bfloat16().requires_grad_()
    dy = torch.randn(tokens, h, device="cuda", generator=g).bfloat16()
    tid = torch.from_numpy(ids[rank].astype("int64")).cuda()
    tw = torch.from_numpy(weights[rank]).cuda().requires_grad_()

    def fresh(*params):
        for p in (x, tw, *params):
            p.grad = None

    def hp_step():
        fresh(m.w1, m.w2)
        m(x, tid, tw).backward(dy)

    def pt_step():
        fresh(w1t, w2t)
        moe_ep(x, w1t, w2t, tid, tw, ep, E).backward(dy)

    rt = m.runtime
    # The steady state a training loop reaches: a routing that outgrows the first bucket grows it `overflow_lag`
    # forwards later (each call here runs two forwards), so the default warm-up covers that many.
    warmup = args.warmup if args.warmup is not None else rt.overflow_lag // 2 + 2
    fwd = {"torch": [], "hpmoe": []}
    step = {"torch": [], "hpmoe": [], "kernels": []}
    for i in range(warmup + args.repeat):
        with torch.no_grad():
            t_fwd = timed_call(lambda: moe_ep(x, w1t, w2t, tid, tw, ep, E))
            h_fwd = timed_call(lambda: m(x, tid, tw))
        t_step = timed_call(pt_step)
        rt.time_kernels = True
        h_step = timed_call(hp_step)
        rt.time_kernels = False
        kernels = slowest(sum(rt.kernel_ms().values()))
        if i >= warmup:
            for name, ms in (("torch", t_fwd), ("hpmoe", h_fwd)):
                fwd[name].append(ms)
            for name, ms in (("torch", t_step), ("hpmoe", h_step), ("kernels", kernels)):
                step[name].append(ms)
    with torch.no_grad():
        diff = (m(x, tid, tw).float() - moe_ep(x, w1t, w2t, tid, tw, ep, E).float()).abs().max()
    rt.check()
    med = {f"{n}_fwdbwd_ms": statistics.median(v) for n, v in step.items()}
    med.update({f"{n}_fwd_ms": statistics.median(v) for n, v in fwd.items()})
    gpu = per_gpu(ids, E, h, inter, med["hpmoe_fwdbwd_ms"])
    gpu["torch_tflops_per_gpu"] = gpu["tflops_per_gpu"] * med["hpmoe_fwdbwd_ms"] / med["torch_fwdbwd_ms"]  # same FLOPs
    return {"model": model, "ep": ep, "tokens": tokens, "routing": routing, "bucket": args.bucket, **med, **gpu,
            "ratio_user": med["torch_fwdbwd_ms"] / med["hpmoe_fwdbwd_ms"],
            "ratio_kernels": med["torch_fwdbwd_ms"] / med["kernels_fwdbwd_ms"],
            "ratio_fwd": med["torch_fwd_ms"] / med["hpmoe_fwd_ms"], "y_max_abs_diff": slowest(float(diff)),
            "overflows_seen": rt.overflows_seen, "buckets": rt.bucket_stats()["buckets"], "warmup": warmup,
            "heap_gib": rt.heap_bytes() / 2 ** 30}


def ep1_bound_ms(model: str, ep: int, tokens: int, args, rank: int, solo) -> float:
    """The communication-free step: MoEFFN at EP 1 in this rank's own group (`solo`), the model's local experts
    at EP `ep`, balanced routing over them, `tokens` tokens; every rank at once; the slowest rank's median ms.
    Where fewer local experts than top-k remain (Mixtral at EP 8: 1 of top-2), each token picks all of them and
    tokens grow by k / E, so a GPU's expert rows stay tokens x k."""
    cfg = model_config(model, ep, tokens)
    k, local = cfg.topk, cfg.experts_per_rank
    if k > local:
        tokens = tokens * k // local
    cfg = cfg.replace(ep=1, recv_rows_per_src=0, topk=min(k, local), tokens=tokens)
    ids, weights = make_routing(cfg, "balanced", 0)
    h, inter, E, k = cfg.hidden, cfg.inter, cfg.experts_per_rank, cfg.topk
    m = MoEFFN(h, inter, E, k, group=solo)
    g = torch.Generator(device="cuda").manual_seed(rank)
    x = torch.randn(tokens, h, device="cuda", generator=g).bfloat16().requires_grad_()
    dy = torch.randn(tokens, h, device="cuda", generator=g).bfloat16()
    tid = torch.from_numpy(ids[0].astype("int64")).cuda()
    tw = torch.from_numpy(weights[0]).cuda().requires_grad_()

    def step():
        for p in (x, tw, m.w1, m.w2):
            p.grad = None
        m(x, tid, tw).backward(dy)

    warmup = args.warmup if args.warmup is not None else 2  # EP 1: one bucket, nothing to grow
    times = [timed_call(step) for _ in range(warmup + args.repeat)]
    return statistics.median(times[warmup:])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, nargs="+", default=[4096, 8192], help="tokens per GPU")
    p.add_argument("--model", nargs="+", default=["deepseek-v3"], choices=sorted(SHAPES),
                   help="expert shapes (default deepseek-v3 with 8 local experts; others split their experts)")
    p.add_argument("--routing", nargs="+", default=["balanced", "skewed"], choices=["balanced", "random", "skewed"])
    p.add_argument("--bucket", choices=sorted(BUCKETS), default="speculative", help="MoEFFN's bucket at EP > 1")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed calls first (default overflow_lag / 2 + 2: the speculative bucket has grown)")
    p.add_argument("--ep1-bound", choices=["on", "off"], default="on",
                   help="also time the communication-free EP 1 step at the same tokens a GPU (the bound)")
    args = p.parse_args()
    dist.init_process_group("nccl")
    rank, ep = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    solo = dist.new_subgroups(group_size=1)[0] if args.ep1_bound == "on" else None  # collective: every rank
    rows = []
    for model, tokens in [(m, t) for m in args.model for t in args.tokens]:
        bound = ep1_bound_ms(model, ep, tokens, args, rank, solo) if solo is not None else None
        for routing in args.routing:
            row = bench(model, tokens, routing, args, rank, ep)
            row["ep1_bound_ms"] = bound
            # The bound holds the balanced rows a GPU; skewed routing puts more on some GPUs than it has.
            row["of_bound"] = bound / row["hpmoe_fwdbwd_ms"] if bound and routing == "balanced" else None
            rows.append(row)
            if rank == 0:
                print(json.dumps(row), flush=True)
    if rank == 0:
        print(f"\n# {torch.cuda.get_device_name()} x {ep}, MoEFFN bucket {args.bucket}, medians of {args.repeat}")
        print("| model, EP, tokens/GPU, routing | PyTorch fwd+bwd | MoEFFN fwd+bwd | its kernels | ratio as the user "
              "sees it | ratio of the kernels | fwd ratio (user) | TFLOP/s a GPU, hpmoe / PyTorch | link GB/s a GPU "
              "(hpmoe) | EP 1 bound | of the bound |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in rows:
            bound = f"{r['ep1_bound_ms']:.2f} ms" if r["ep1_bound_ms"] else "-"
            of = f"{r['of_bound']:.2f}" if r["of_bound"] else "-"
            print(f"| {r['model']}, {r['ep']}, {r['tokens']}, {r['routing']} | {r['torch_fwdbwd_ms']:.2f} ms | "
                  f"{r['hpmoe_fwdbwd_ms']:.2f} ms | {r['kernels_fwdbwd_ms']:.2f} ms | {r['ratio_user']:.2f} | "
                  f"{r['ratio_kernels']:.2f} | {r['ratio_fwd']:.2f} | {r['tflops_per_gpu']:.0f} / "
                  f"{r['torch_tflops_per_gpu']:.0f} | {r['link_gb_s_per_gpu']:.0f} | {bound} | {of} |")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
