"""`hpmoe run --backend cuda`: compile, run forward and backward on this host's GPUs (rank r on GPU r % count,
one process driving all of them), check every output against the float64 reference, optionally write the
per-task GPU trace. Exit 0 only if all outputs are within tolerance (1 otherwise, 2 for errors)."""
from __future__ import annotations

import argparse
import time

from ..reference import moe_reference
from ..runtime.routing import bucket_for, make_routing
from ..runtime.tolerances import compare
from ..runtime.twin import make_inputs


def cmd_run_cuda(args: argparse.Namespace, cfg) -> int:
    from .group import CudaGroup
    from .trace import write_trace

    topk_ids, topk_weights = make_routing(cfg, args.routing, args.seed)
    if args.recv_rows_per_src is None:
        cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, topk_ids))
    inputs = make_inputs(cfg, topk_ids, topk_weights, args.seed)
    devices = [int(d) for d in args.devices.split(",")] if args.devices else None
    if devices is not None and len(devices) != cfg.ep:
        devices = [devices[r % len(devices)] for r in range(cfg.ep)]
    with CudaGroup(cfg, devices) as group:
        group.load_inputs(inputs)
        start = time.perf_counter()
        ms = {"fwd": 0.0, "bwd": 0.0}
        for _ in range(args.iterations):
            for d in ("fwd", "bwd"):
                ms[d] = max(group.run(d, timeout_s=args.timeout, trace=bool(args.trace)))
        elapsed = time.perf_counter() - start
        outputs = group.outputs()
        if args.trace:
            stamps = {(d, r): group.trace(r, d) for d in ("fwd", "bwd") for r in range(cfg.ep)}
            write_trace(args.trace, group.schedules, stamps)
    reference = moe_reference(inputs.x, inputs.w1, inputs.w2, inputs.topk_ids, inputs.topk_weights, inputs.dy)
    print(f"ep={cfg.ep} tokens={cfg.tokens} hidden={cfg.hidden} inter={cfg.inter} "
          f"experts_per_rank={cfg.experts_per_rank} topk={cfg.topk} dtype={cfg.dtype} C={cfg.recv_rows_per_src} "
          f"workers={cfg.num_aic}+{cfg.num_aiv} routing={args.routing} backend=cuda: fwd+bwd x{args.iterations} in "
          f"{elapsed:.3f} s (last kernels: fwd {ms['fwd']:.3f} ms, bwd {ms['bwd']:.3f} ms)")
    ok = True
    for name, err, tol, passed in compare(outputs, reference, cfg.dtype):
        print(f"{name:<14} max rel err {err:.3e}  tol {tol:.1e}  {'ok' if passed else 'FAIL'}")
        ok &= passed
    return 0 if ok else 1
