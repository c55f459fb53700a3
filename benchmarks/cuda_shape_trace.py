"""A traced forward and backward of MoEFFN's schedule for one model's expert shape (EP 1, random routing):
the kernels' times and a Perfetto trace for benchmarks/cuda_trace_summary.py, to see where a slow shape's
time goes (which task types, how many blocks busy over time).

    python3 benchmarks/cuda_shape_trace.py mixtral-8x7b:4096 --out trace.json [--gmm-n-block N] [--act-n-block N]
        [--wgrad-n-block N] [--pipelines] [--transposed]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_user_step import SHAPES, add_expert_aligned_arg, auto_choice  # noqa: E402

from hpmoe.act_split import act_n_block  # noqa: E402
from hpmoe.config import make_config  # noqa: E402
from hpmoe.cuda.group import CudaGroup  # noqa: E402
from hpmoe.cuda.trace import write_trace  # noqa: E402
from hpmoe.runtime.routing import make_routing  # noqa: E402
from hpmoe.torch import MoeFfnRuntime  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("shape", help=f"MODEL:TOKENS, MODEL one of {', '.join(SHAPES)}")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--gmm-n-block", type=int, default=None, help="override the column block (0: whole width)")
    p.add_argument("--wgrad-n-block", type=int, default=None,
                   help="output columns per weight-gradient task (wgrad_split.py; default: whole widths)")
    p.add_argument("--act-n-block", type=int, default=None,
                   help="override the SwiGLU column block (0: the rule; I or more: whole rows)")
    p.add_argument("--pipelines", action="store_true", help="force row pipelines")
    p.add_argument("--workers", help="AIC+AIV blocks, e.g. 96+36 (default: MoEFFN's)")
    p.add_argument("--transposed", action="store_true",
                   help="weights in nn.Linear's / transformers' layout ([E, 2I, h], [E, h, I])")
    add_expert_aligned_arg(p)
    args = p.parse_args()
    model, tokens = args.shape.split(":")
    h, inter, E, k = SHAPES[model]
    rt = MoeFfnRuntime(h, inter, E, k, expert_aligned=auto_choice(args.expert_aligned))
    cfg = rt.config(int(tokens), None, args.transposed)
    if args.pipelines:
        cfg = cfg.replace(row_pipelines=True)
    if args.workers:
        aic, aiv = (int(v) for v in args.workers.split("+"))
        cfg = cfg.replace(num_aic=aic, num_aiv=aiv)
    if args.gmm_n_block is not None:
        cfg = cfg.replace(gmm_n_block=args.gmm_n_block)
    if args.act_n_block is not None:
        cfg = cfg.replace(act_n_block=args.act_n_block)
    if args.wgrad_n_block is not None:
        cfg = cfg.replace(wgrad_n_block=args.wgrad_n_block)
    ids, weights = make_routing(make_config(None, {"ep": 1, "tokens": int(tokens), "hidden": h, "inter": inter,
                                                   "experts_per_rank": E, "topk": k, "dtype": "bf16"}), "random", 0)
    rng = np.random.default_rng(0)
    bf16 = lambda a: torch.from_numpy(a.astype(np.float32)).bfloat16().view(torch.int16).numpy().view(np.uint16)  # noqa: E731
    with CudaGroup(cfg, [0]) as g:
        T = int(tokens)
        w1 = rng.standard_normal((E, 2 * inter, h) if args.transposed else (E, h, 2 * inter)) * h ** -0.5
        w2 = rng.standard_normal((E, h, inter) if args.transposed else (E, inter, h)) * inter ** -0.5
        g.load_rank(0, bf16(rng.standard_normal((T, h))), bf16(w1), bf16(w2), bf16(rng.standard_normal((T, h))),
                    ids[0], weights[0])
        for _ in range(2):
            f, b = g.run("fwd", timeout_s=60)[0], g.run("bwd", timeout_s=60)[0]
        g.run("fwd", timeout_s=60, trace=True)
        g.run("bwd", timeout_s=60, trace=True)
        stamps = {(d, 0): g.trace(0, d) for d in ("fwd", "bwd")}
        write_trace(args.out, g.schedules, stamps)
    print(f"{args.shape}: weights_transposed={cfg.weights_transposed} row_pipelines={cfg.row_pipelines} "
          f"claim_pool={cfg.claim_pool} gmm_n_block={cfg.gmm_n_block} act_n_block={act_n_block(cfg)} "
          f"expert_aligned={cfg.expert_aligned} C={cfg.recv_rows_per_src} "
          f"workers {cfg.num_aic}+{cfg.num_aiv}: fwd {f:.2f} ms, bwd {b:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
