"""`hpmoe run`: compile, execute forward and backward on the CPU twin across all ranks, check against the
float64 reference. Exit 0 only if every output is within tolerance (1 otherwise, 2 for errors)."""
from __future__ import annotations

import argparse
import time

from ..cli import add_config_args, config_from_args
from ..compiler import compile_schedules
from ..reference import moe_reference
from .routing import ROUTINGS, bucket_for, make_routing
from .tolerances import compare
from .twin import CpuTwin, make_inputs


def cmd_run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    if args.backend == "cuda":
        from ..cuda.run import cmd_run_cuda
        return cmd_run_cuda(args, cfg)
    topk_ids, topk_weights = make_routing(cfg, args.routing, args.seed)
    if args.recv_rows_per_src is None:  # pick the bucket that fits this routing
        cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, topk_ids))
    inputs = make_inputs(cfg, topk_ids, topk_weights, args.seed)
    schedules = compile_schedules(cfg, ["fwd", "bwd"], list(range(cfg.ep)))
    mode = "threads" if args.threads else "processes"
    with CpuTwin(cfg, schedules, shared_memory=not args.threads, timeout_s=args.timeout,
                 backend=args.backend) as twin:
        twin.load_inputs(inputs)  # routing plan + bucket check: refuses before anything runs
        start = time.perf_counter()
        if args.threads:
            for _ in range(args.iterations):
                twin.run_threads("fwd")
                twin.run_threads("bwd")
        else:
            twin.run_processes(args.iterations)
        elapsed = time.perf_counter() - start
        outputs = twin.outputs()
    reference = moe_reference(inputs.x, inputs.w1, inputs.w2, inputs.topk_ids, inputs.topk_weights, inputs.dy)
    print(f"ep={cfg.ep} tokens={cfg.tokens} hidden={cfg.hidden} inter={cfg.inter} "
          f"experts_per_rank={cfg.experts_per_rank} topk={cfg.topk} dtype={cfg.dtype} C={cfg.recv_rows_per_src} "
          f"workers={cfg.num_aic}+{cfg.num_aiv} routing={args.routing} backend={args.backend} ranks as {mode}: "
          f"fwd+bwd x{args.iterations} in {elapsed:.3f} s")
    ok = True
    for name, err, tol, passed in compare(outputs, reference, cfg.dtype):
        print(f"{name:<14} max rel err {err:.3e}  tol {tol:.1e}  {'ok' if passed else 'FAIL'}")
        ok &= passed
    return 0 if ok else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run fwd+bwd on the CPU twin (ranks as processes) and check vs float64",
                       description="Compile, execute forward and backward across all ranks on the CPU twin, and "
                                   "compare every output with the float64 reference.")
    add_config_args(p, default_preset="small")
    p.add_argument("--routing", choices=ROUTINGS, default="random", help="how tokens pick experts")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", action="store_true", help="ranks as thread groups of one process")
    p.add_argument("--timeout", type=float, default=30.0, metavar="S", help="bound on every wait, seconds")
    p.add_argument("--iterations", type=int, default=1, help="fwd+bwd launches (epoch counters, no reset)")
    p.add_argument("--backend", choices=["cpu", "ascendc-cpu", "cuda"], default="cpu",
                   help="cpu: the CPU twin; ascendc-cpu: the AscendC kernel compiled against the project's "
                        "stubs, AIC/AIV cores as threads (docs/ascend.md); cuda: persistent kernels on this "
                        "host's GPUs (docs/cuda.md)")
    p.add_argument("--devices", metavar="LIST", help="cuda: GPU of each rank, e.g. 0,1,2,3 (default: rank r on GPU r)")
    p.add_argument("--trace", metavar="FILE", help="cuda: write the per-task GPU trace (Chrome/Perfetto JSON)")
    p.add_argument("--one-process", action="store_true",
                   help="cuda: drive every GPU from this process (default: one process per GPU when each rank has one)")
    p.set_defaults(func=cmd_run)
