"""`hpmoe run`: compile, execute forward and backward on the CPU twin across all ranks, check against the
float64 reference. Exit 0 only if every output is within tolerance (1 otherwise, 2 for errors)."""
from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from .. import limits
from ..args import check_output_file, float_arg, int_arg, int_list_arg
from ..cli import add_config_args, config_from_args
from ..compiler import compile_schedules
from ..errors import HpmoeError
from ..act_split import act_n_block
from ..gmm_split import gmm_widths, n_block
from ..reference import moe_reference
from .routing import ROUTINGS, bucket_for, make_routing
from .tolerances import compare
from .twin import CpuTwin, make_inputs

CLEANUP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(Exception):
    """SIGTERM or SIGHUP reached the launcher: unwind so every `finally` and `with` cleans up."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _terminate(signum: int, _frame) -> None:
    for s in CLEANUP_SIGNALS:  # a second signal must not interrupt the cleanup the first one started
        signal.signal(s, signal.SIG_IGN)
    raise Terminated(signum)


def cmd_run(args: argparse.Namespace) -> int:
    """The launcher. SIGTERM and SIGHUP stop the rank processes and remove the shared-memory heap."""
    if threading.current_thread() is not threading.main_thread():  # signal handlers need the main thread
        return _run(args)
    previous = {s: signal.signal(s, _terminate) for s in CLEANUP_SIGNALS}
    try:
        return _run(args)
    except Terminated as exc:
        print(f"hpmoe run: terminated by {exc}; rank processes stopped, shared memory removed", file=sys.stderr)
        return 128 + exc.signum
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    if args.backend == "cuda":
        if args.mixed_queues is None:  # every CUDA block runs every handler
            cfg = cfg.replace(mixed_queues=True)
        if args.claim_pool is None:  # the CUDA Sync claims weight-gradient tiles at run time
            cfg = cfg.replace(claim_pool=True)
        if args.trace is not None:  # refuse a bad trace path before the GPUs run, not after
            check_output_file(args.trace, "trace file")
        limits.check_compile(cfg, cfg.ep)  # the host compiles the group and holds float64 inputs
        from ..cuda.run import cmd_run_cuda
        return cmd_run_cuda(args, cfg)
    if args.backend == "ascendc-cpu" and cfg.mixed_queues:
        raise HpmoeError("--mixed-queues deals vector tasks to cube workers, which an AI core's AIC cannot run: "
                         "drop it for --backend ascendc-cpu")
    if args.backend == "ascendc-cpu" and cfg.claim_pool:
        raise HpmoeError("--claim-pool is not built for the AscendC kernel: drop it for --backend ascendc-cpu")
    if args.backend == "ascendc-cpu" and cfg.weights_transposed:
        raise HpmoeError("--weights-transposed is not built for the AscendC kernel: drop it for --backend ascendc-cpu")
    if args.backend == "ascendc-cpu" and n_block(cfg) and n_block(cfg) < max(gmm_widths(cfg)):
        raise HpmoeError("--gmm-n-block splits GMM outputs, which the AscendC kernel does not: drop it for "
                         "--backend ascendc-cpu")
    if args.backend == "ascendc-cpu" and act_n_block(cfg):
        raise HpmoeError("--act-n-block splits SwiGLU into column blocks, which the AscendC kernel does not: drop "
                         "it for --backend ascendc-cpu")
    limits.check_run(cfg)  # before the routing draw: that alone can be T x experts floats per rank
    topk_ids, topk_weights = make_routing(cfg, args.routing, args.seed)
    if args.recv_rows_per_src is None:  # pick the bucket that fits this routing
        cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, topk_ids))
        limits.check_run(cfg)
    inputs = make_inputs(cfg, topk_ids, topk_weights, args.seed)
    schedules = compile_schedules(cfg, ["fwd", "bwd"], list(range(cfg.ep)))
    mode = "threads" if args.threads else "processes"
    with CpuTwin(cfg, schedules, shared_memory=not args.threads, timeout_s=args.timeout,
                 backend=args.backend) as twin:
        if twin.stale_removed:  # a note, on stderr: stdout stays the report that scripts parse
            print(f"hpmoe run: note: removed {len(twin.stale_removed)} shared-memory segment(s) left by killed "
                  f"launchers: {', '.join(twin.stale_removed)}", file=sys.stderr)
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
    p.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0)
    p.add_argument("--threads", action="store_true", help="ranks as thread groups of one process")
    p.add_argument("--timeout", type=float_arg(0.01, 86400.0), default=30.0, metavar="S",
                   help="bound on every wait, seconds (0.01 to 86400); a stopped or dead rank is reported "
                        "within about this long")
    p.add_argument("--iterations", type=int_arg(1, 10**6), default=1,
                   help="fwd+bwd launches (epoch counters, no reset)")
    p.add_argument("--backend", choices=["cpu", "ascendc-cpu", "cuda"], default="cpu",
                   help="cpu: the CPU twin; ascendc-cpu: the AscendC kernel compiled against the project's "
                        "stubs, AIC/AIV cores as threads (docs/ascend.md); cuda: persistent kernels on this "
                        "host's GPUs (docs/cuda.md)")
    p.add_argument("--devices", metavar="LIST", type=int_list_arg(0, 1023),
                   help="cuda: GPU of each rank, e.g. 0,1,2,3 (default: rank r on GPU r)")
    p.add_argument("--trace", metavar="FILE", help="cuda: write the per-task GPU trace (Chrome/Perfetto JSON)")
    p.add_argument("--one-process", action="store_true",
                   help="cuda: drive every GPU from this process (default: one process per GPU when each rank has one)")
    p.set_defaults(func=cmd_run)
