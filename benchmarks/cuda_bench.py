"""EP 1 on one GPU: hpmoe's persistent kernels (one launch per direction) vs the PyTorch kernel-by-kernel
path, same inputs, same run, DeepSeek-V3 expert shapes (h 7168, I 2048, 8 local experts, top-8, bf16).
Also the GMM tiles' throughput inside the worker loop (from the per-task GPU trace) vs torch._grouped_mm
alone at the same shapes, and y's normwise difference between the two paths (a sanity check; the float64
reference is too slow at these sizes and is checked at small shapes by tests/cuda).

    python3 benchmarks/cuda_bench.py --tokens 4096 8192 [--routing balanced skewed] [--json-out FILE]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_torch_path import moe_ffn_torch  # noqa: E402
from ep_traffic import gemm_flops  # noqa: E402

from hpmoe.config import make_config  # noqa: E402
from hpmoe.cuda.group import CudaGroup  # noqa: E402
from hpmoe.runtime.routing import bucket_for, check_routing, make_routing  # noqa: E402
from hpmoe.ssc_format import Slot  # noqa: E402
from cuda_variants import variant_config, variant_name  # noqa: E402
from cuda_user_step import time_group_kernels, timed  # noqa: E402


def cuda_time(fn, repeat: int) -> float:
    """Median ms of `fn` over `repeat` runs after one warm-up, with CUDA events (cuda_user_step.timed)."""
    return timed(fn, repeat, warmup=1)


def bits(t: torch.Tensor) -> np.ndarray:
    return t.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)


def bench(tokens: int, routing: str, args) -> list[dict]:
    cfg = make_config("deepseek-v3", {"ep": 1, "tokens": tokens, "tile_m": args.tile_m, "wgrad_tile": args.wgrad_tile,
                                      "token_tile": args.token_tile, "num_aic": args.aic, "num_aiv": args.aiv})
    ids, weights = make_routing(cfg, routing, 0)
    cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, ids))
    check_routing(cfg, ids, weights)
    h, inter, E, k = cfg.hidden, cfg.inter, cfg.experts_per_rank, cfg.topk
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(tokens, h, device="cuda", generator=g).bfloat16()
    w1 = (torch.randn(E, h, 2 * inter, device="cuda", generator=g) * h ** -0.5).bfloat16()
    w2 = (torch.randn(E, inter, h, device="cuda", generator=g) * inter ** -0.5).bfloat16()
    dy = torch.randn(tokens, h, device="cuda", generator=g).bfloat16()
    tid = torch.from_numpy(ids[0].astype(np.int64)).cuda()
    tw = torch.from_numpy(weights[0]).cuda()
    rows = tokens * k

    # PyTorch path: forward alone, and forward + backward (weights and x need gradients, as in training).
    xg, w1g, w2g = (t.detach().requires_grad_() for t in (x, w1, w2))
    torch_fwd = cuda_time(lambda: moe_ffn_torch(xg, w1g, w2g, tid, tw), args.repeat)
    torch_fb = cuda_time(lambda: moe_ffn_torch(xg, w1g, w2g, tid, tw).backward(dy), args.repeat)
    with torch.no_grad():
        y_torch = moe_ffn_torch(x, w1, w2, tid, tw).float()
    # torch._grouped_mm alone at the same shapes (both forward GEMMs, balanced groups from this routing).
    counts = torch.bincount(tid.reshape(-1), minlength=E)
    offs = torch.cumsum(counts, 0).to(torch.int32)
    xs = torch.randn(rows, h, device="cuda", generator=g).bfloat16()
    a = torch.randn(rows, inter, device="cuda", generator=g).bfloat16()
    gmm_ms = cuda_time(lambda: (torch._grouped_mm(xs, w1, offs=offs), torch._grouped_mm(a, w2, offs=offs)), args.repeat)

    return [bench_hpmoe(variant_config(cfg, v), args, (x, w1, w2, dy), ids, weights, routing, y_torch,
                        {"torch_fwd_ms": torch_fwd, "torch_fwdbwd_ms": torch_fb, "gmm_ms": gmm_ms})
            for v in args.variants]  # side by side, against the same torch numbers


def bench_hpmoe(cfg, args, tensors, ids, weights, routing, y_torch, torch_ms) -> dict:
    x, w1, w2, dy = tensors
    tokens, h, inter, rows = cfg.tokens, cfg.hidden, cfg.inter, cfg.tokens * cfg.topk
    torch_fwd, torch_fb, gmm_ms = torch_ms["torch_fwd_ms"], torch_ms["torch_fwdbwd_ms"], torch_ms["gmm_ms"]
    with CudaGroup(cfg, [0]) as group:
        group.load_rank(0, bits(x), bits(w1), bits(w2), bits(dy), ids[0], weights[0])
        fwd_ms, bwd_ms, stamps, sched = time_group_kernels(group, args.repeat)
        y_hp = torch.from_numpy(group.read(0, Slot.Y).view(np.int16)).cuda().view(torch.bfloat16).float()
    types = sched.tasks["task_type"]
    gmm = types == 3
    span_ns = float(stamps[gmm, 1].max() - stamps[gmm, 0].min())
    busy_ns = float((stamps[gmm, 1] - stamps[gmm, 0]).sum())
    ffl, bfl = gemm_flops(rows, h, inter, False), gemm_flops(rows, h, inter, True)
    res = {
        "tokens": tokens, "routing": routing, "C": cfg.recv_rows_per_src, "workers": f"{cfg.num_aic}+{cfg.num_aiv}",
        "variant": variant_name(cfg),
        "hpmoe_fwd_ms": fwd_ms, "hpmoe_fwdbwd_ms": fwd_ms + bwd_ms, "torch_fwd_ms": torch_fwd,
        "torch_fwdbwd_ms": torch_fb, "speedup_fwd": torch_fwd / fwd_ms, "speedup_fwdbwd": torch_fb / (fwd_ms + bwd_ms),
        "hpmoe_fwd_tflops": ffl / fwd_ms / 1e9, "hpmoe_fwdbwd_tflops": bfl / (fwd_ms + bwd_ms) / 1e9,
        "torch_fwdbwd_tflops": bfl / torch_fb / 1e9,
        "gmm_in_loop_tflops": ffl / span_ns / 1e3, "gmm_blocks_busy_tflops_per_block": ffl / busy_ns / 1e3 * 1,
        "torch_grouped_mm_tflops": ffl / gmm_ms / 1e9, "gmm_ratio": (ffl / span_ns / 1e3) / (ffl / gmm_ms / 1e9),
        "y_rel_diff_vs_torch": float((y_hp - y_torch).abs().max() / y_torch.abs().max()),
    }
    print(json.dumps(res), flush=True)
    return res


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, nargs="+", default=[4096, 8192])
    p.add_argument("--routing", nargs="+", default=["balanced", "skewed"])
    p.add_argument("--tile-m", type=int, default=128)
    p.add_argument("--wgrad-tile", type=int, default=128)
    p.add_argument("--token-tile", type=int, default=64)
    p.add_argument("--aic", type=int, default=112)
    p.add_argument("--aiv", type=int, default=20)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--variants", nargs="+",
                   default=["pipelines+pool:128+4", "pipelines:128+4", "mixed+pool", "mixed", "split"],
                   help="hpmoe schedules timed against the same PyTorch numbers (benchmarks/cuda_variants.py)")
    p.add_argument("--json-out")
    args = p.parse_args()
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}", flush=True)
    results = [res for t in args.tokens for r in args.routing for res in bench(t, r, args)]
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
