"""`hpmoe run --backend cuda`: compile, run forward and backward on this host's GPUs, check every output against
the float64 reference, optionally write the per-task GPU trace. Ranks run as one process per GPU (heaps
mapped through CUDA IPC, rank_proc.py) when every rank has its own GPU, else (or with --one-process) one
process drives all GPUs. Exit 0 only if all outputs are within tolerance (1 otherwise, 2 for errors)."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ..reference import moe_reference
from ..runtime.routing import bucket_for, make_routing
from ..runtime.tolerances import compare
from ..runtime.dtypes import to_float64
from ..runtime.twin import OUTPUTS, make_inputs
from ..ssc_format import Slot
from .native import CudaFailure, gpu_count


def _run_processes(args: argparse.Namespace, cfg, devices: list[int]):
    """One rank process per GPU; returns (outputs as float64 stacked over ranks, ms per direction, stamps)."""
    with tempfile.TemporaryDirectory(prefix="hpmoe-cuda-") as tmp:
        procs = [subprocess.Popen([sys.executable, "-m", "hpmoe.cuda.rank_proc", "--dir", tmp, "--rank", str(r),
                                   "--device", str(devices[r]), "--config", json.dumps(cfg.to_json()),
                                   "--routing", args.routing, "--seed", str(args.seed), "--timeout", str(args.timeout),
                                   "--iterations", str(args.iterations)] + (["--trace"] if args.trace else []),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for r in range(cfg.ep)]
        failures = []
        for r, p in enumerate(procs):
            try:
                _, err = p.communicate(timeout=args.timeout * 2 * args.iterations + 300)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
            if p.returncode != 0:
                lines = err.strip().splitlines()
                failures.append(lines[-1] if lines else f"rank {r} process died (exit status {p.returncode})")
        if failures:
            raise CudaFailure("; ".join(failures))
        files = [np.load(Path(tmp, f"out{r}.npz")) for r in range(cfg.ep)]
        outputs = {name: np.stack([to_float64(f[name], cfg.dtype if slot in (Slot.Y, Slot.DX) else "fp32")
                                   for f in files]) for name, slot in OUTPUTS.items()}
        ms = {d: max(float(f[f"ms_{d}"]) for f in files) for d in ("fwd", "bwd")}
        stamps = ({(d, r): files[r][f"trace_{d}"] for d in ("fwd", "bwd") for r in range(cfg.ep)}
                  if args.trace else {})
        return outputs, ms, stamps


def cmd_run_cuda(args: argparse.Namespace, cfg) -> int:
    from .group import CudaGroup
    from .trace import write_trace

    topk_ids, topk_weights = make_routing(cfg, args.routing, args.seed)
    if args.recv_rows_per_src is None:
        cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, topk_ids))
    inputs = make_inputs(cfg, topk_ids, topk_weights, args.seed)
    devices = [int(d) for d in args.devices.split(",")] if args.devices else list(range(cfg.ep))
    if len(devices) != cfg.ep:
        devices = [devices[r % len(devices)] for r in range(cfg.ep)]
    processes = not args.one_process and cfg.ep > 1 and len(set(devices)) == cfg.ep and gpu_count() >= cfg.ep
    if processes:
        from ..compiler import compile_schedules
        start = time.perf_counter()
        outputs, ms, stamps = _run_processes(args, cfg, devices)
        elapsed = time.perf_counter() - start
        if args.trace:
            write_trace(args.trace, compile_schedules(cfg, ["fwd", "bwd"], list(range(cfg.ep))), stamps)
    else:
        outputs, ms, elapsed = _run_one_process(args, cfg, inputs, devices, CudaGroup, write_trace)
    mode = "one process per GPU" if processes else "one process"
    _report_header(args, cfg, mode, elapsed, ms)
    return _compare(inputs, outputs, cfg)


def _run_one_process(args, cfg, inputs, devices, CudaGroup, write_trace):
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
    return outputs, ms, elapsed


def _report_header(args, cfg, mode, elapsed, ms) -> None:
    print(f"ep={cfg.ep} tokens={cfg.tokens} hidden={cfg.hidden} inter={cfg.inter} "
          f"experts_per_rank={cfg.experts_per_rank} topk={cfg.topk} dtype={cfg.dtype} C={cfg.recv_rows_per_src} "
          f"workers={cfg.num_aic}+{cfg.num_aiv} routing={args.routing} backend=cuda, {mode}: fwd+bwd "
          f"x{args.iterations} in {elapsed:.3f} s (last kernels: fwd {ms['fwd']:.3f} ms, bwd {ms['bwd']:.3f} ms)")


def _compare(inputs, outputs, cfg) -> int:
    reference = moe_reference(inputs.x, inputs.w1, inputs.w2, inputs.topk_ids, inputs.topk_weights, inputs.dy)
    ok = True
    for name, err, tol, passed in compare(outputs, reference, cfg.dtype):
        print(f"{name:<14} max rel err {err:.3e}  tol {tol:.1e}  {'ok' if passed else 'FAIL'}")
        ok &= passed
    return 0 if ok else 1
