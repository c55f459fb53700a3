"""One EP rank as its own process: attach the group heap (POSIX shared memory), load this rank's SSCs, run
forward then backward `--iterations` times. Prints one line and exits 1 on failure."""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
from pathlib import Path

from ..config import make_config
from ..errors import HpmoeError
from . import native

PR_SET_PDEATHSIG = 1


def _die_with(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL this rank when the launcher dies (even by SIGKILL), so no rank outlives it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the launcher died before the request took effect
        sys.exit(1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hpmoe.runtime.rank_main")
    p.add_argument("--shm", required=True)
    p.add_argument("--ssc-dir", required=True)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--config", required=True, help="MoeConfig as JSON")
    p.add_argument("--counters", required=True, help="fwd,bwd counter capacity")
    p.add_argument("--timeout-ms", type=int, default=30000)
    p.add_argument("--iterations", type=int, default=1)
    p.add_argument("--handlers", choices=["compute", "null"], default="compute")
    p.add_argument("--fault", default="0,0,0", help="mode,after,direction (test hook)")
    p.add_argument("--parent-pid", type=int, default=0, help="the launcher: die with it (Linux)")
    p.add_argument("--backend", choices=sorted(native.BACKENDS), default="cpu")
    args = p.parse_args(argv)
    if args.parent_pid:
        _die_with(args.parent_pid)
    try:
        native.use_backend(args.backend)
        cfg = make_config(None, json.loads(args.config))
        counters = [int(v) for v in args.counters.split(",")]
        layout = native.HeapLayout(cfg, *counters)
        heap = native.GroupHeap(layout, args.shm, create=False)
        mode, after, direction = (int(v) for v in args.fault.split(","))
        opts = native.RankOptions(timeout_ms=args.timeout_ms, handlers=int(args.handlers == "null"),
                                  fault_mode=mode, fault_after=after, fault_direction=direction)
        ssc = {d: Path(args.ssc_dir, f"rank{args.rank}.{d}.ssc").read_bytes() for d in ("fwd", "bwd")}
        rank = native.RankHandle(heap, args.rank, ssc["fwd"], ssc["bwd"], opts)
        for _ in range(args.iterations):
            native.run([rank], "fwd")
            native.run([rank], "bwd")
        rank.close()
        heap.close()
    except (HpmoeError, OSError, ValueError) as exc:
        print(f"rank {args.rank}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
