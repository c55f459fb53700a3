"""hpmoe's persistent kernels on EP N GPUs of one host (one process drives all of them; peers' heaps through
P2P pointers over NVLink): forward and forward+backward kernel time of the slowest rank, DeepSeek-V3 expert
shapes, the same routing generator and seed as benchmarks/cuda_ep_torch.py (run both in one session).

    python3 benchmarks/cuda_ep_bench.py --ep 4 --tokens 4096 8192 --routing balanced skewed
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

import numpy as np
import torch

from hpmoe.config import make_config
from hpmoe.cuda.group import CudaGroup
from hpmoe.cuda.trace import write_trace
from hpmoe.runtime.routing import bucket_for, check_routing, make_routing

from cuda_variants import variant_config, variant_name


def bits(t: torch.Tensor) -> np.ndarray:
    return t.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ep", type=int, default=4)
    p.add_argument("--tokens", type=int, nargs="+", default=[4096])
    p.add_argument("--routing", nargs="+", default=["balanced"])
    p.add_argument("--tile-m", type=int, default=128)
    p.add_argument("--token-tile", type=int, default=64, help="tokens per final top-k reduction task")
    p.add_argument("--aic", type=int, default=112)
    p.add_argument("--aiv", type=int, default=20)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--variants", nargs="+",
                   default=["pipelines+pool:128+4", "pipelines:128+4", "mixed+pool", "mixed", "split"],
                   help="hpmoe schedules timed one after the other (benchmarks/cuda_variants.py)")
    p.add_argument("--trace", metavar="FILE", help="per-task GPU trace of the first config's last fwd + bwd")
    args = p.parse_args()
    for tokens in args.tokens:
        for routing, variant in ((r, v) for r in args.routing for v in args.variants):
            cfg = make_config("deepseek-v3", {"ep": args.ep, "tokens": tokens, "tile_m": args.tile_m,
                                              "wgrad_tile": 128, "token_tile": args.token_tile, "num_aic": args.aic,
                                              "num_aiv": args.aiv})
            cfg = variant_config(cfg, variant)
            ids, weights = make_routing(cfg, routing, 0)
            cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, ids))
            check_routing(cfg, ids, weights)
            h, inter, E = cfg.hidden, cfg.inter, cfg.experts_per_rank
            with CudaGroup(cfg, list(range(args.ep))) as group:
                for r in range(args.ep):
                    g = torch.Generator(device="cuda").manual_seed(r)
                    x = torch.randn(tokens, h, device="cuda", generator=g).bfloat16()
                    w1 = (torch.randn(E, h, 2 * inter, device="cuda", generator=g) * h ** -0.5).bfloat16()
                    w2 = (torch.randn(E, inter, h, device="cuda", generator=g) * inter ** -0.5).bfloat16()
                    dy = torch.randn(tokens, h, device="cuda", generator=g).bfloat16()
                    group.load_rank(r, bits(x), bits(w1), bits(w2), bits(dy), ids[r], weights[r])
                    del x, w1, w2, dy
                fwd, bwd = [], []
                for i in range(args.repeat + 1):
                    f = max(group.run("fwd", timeout_s=60))
                    b = max(group.run("bwd", timeout_s=60))
                    if i:
                        fwd.append(f)
                        bwd.append(b)
                if args.trace:
                    group.run("fwd", timeout_s=60, trace=True)
                    group.run("bwd", timeout_s=60, trace=True)
                    stamps = {(d, r): group.trace(r, d) for d in ("fwd", "bwd") for r in range(args.ep)}
                    write_trace(args.trace, group.schedules, stamps)
                    args.trace = None
            f, b = statistics.median(fwd), statistics.median(bwd)
            print(json.dumps({"path": "hpmoe", "ep": args.ep, "tokens": tokens, "routing": routing,
                              "C": cfg.recv_rows_per_src, "workers": f"{cfg.num_aic}+{cfg.num_aiv}",
                              "variant": variant_name(cfg), "tile_m": cfg.tile_m, "token_tile": cfg.token_tile,
                              "fwd_ms": f, "fwdbwd_ms": f + b}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
