"""One rank of `hpmoe run --backend cuda` as its own process on its own GPU (`python -m
hpmoe.cuda.rank_proc`, spawned by run.py): regenerates the group's inputs from the seed, compiles its own
rank's SSCs (the peers' come as files in the run directory, for the loader's group check), maps its peers'
heaps through CUDA IPC handles exchanged there too, runs fwd + bwd, and writes its outputs (and trace) there.
A failure prints one line on stderr and exits 3."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from .. import ssc_io
from ..compiler import compile_schedules
from ..config import make_config
from ..errors import HpmoeError
from ..runtime.dtypes import to_storage
from ..runtime.routing import make_routing
from ..runtime.twin import OUTPUTS, make_inputs
from ..weight_layout import stored
from .group import CudaGroup


def _wait_for(paths: list[Path], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not all(p.exists() for p in paths):
        if time.monotonic() > deadline:
            missing = [p.name for p in paths if not p.exists()]
            raise HpmoeError(f"{what}: no {', '.join(missing)} after {timeout_s:.0f} s (a peer process died?)")
        time.sleep(0.01)


def _publish(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)  # peers never see a half-written file


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--device", type=int, required=True)
    p.add_argument("--config", required=True, help="MoeConfig as JSON")
    p.add_argument("--routing", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--iterations", type=int, default=1)
    p.add_argument("--trace", action="store_true")
    args = p.parse_args(argv)
    run_dir, r = Path(args.dir), args.rank
    try:
        cfg = make_config(None, json.loads(args.config))
        ids, weights = make_routing(cfg, args.routing, args.seed)
        inputs = make_inputs(cfg, ids, weights, args.seed)

        def exchange(handle: bytes) -> list[bytes]:
            _publish(run_dir / f"heap{r}.ipc", handle)
            files = [run_dir / f"heap{q}.ipc" for q in range(cfg.ep)]
            _wait_for(files, 120, f"rank {r} waiting for heap handles")
            return [f.read_bytes() for f in files]

        own = compile_schedules(cfg, ["fwd", "bwd"], [r])  # a single-rank compile is the group's file for r
        for s in own:
            _publish(run_dir / f"ssc{r}_{s.direction_name}.ssc", ssc_io.to_bytes(s))
        files = {d: [run_dir / f"ssc{q}_{d}.ssc" for q in range(cfg.ep)] for d in ("fwd", "bwd")}
        _wait_for(files["fwd"] + files["bwd"], 120, f"rank {r} waiting for the peers' SSC files")
        peer_ssc = {d: [f.read_bytes() for f in paths] for d, paths in files.items()}
        with CudaGroup(cfg, [args.device], own, local_rank=r, exchange=exchange, peer_ssc=peer_ssc) as group:
            wt = cfg.weights_transposed
            group.load_rank(r, to_storage(inputs.x[r], cfg.dtype), to_storage(stored(inputs.w1[r], wt), cfg.dtype),
                            to_storage(stored(inputs.w2[r], wt), cfg.dtype), to_storage(inputs.dy[r], cfg.dtype),
                            ids[r], weights[r])
            _publish(run_dir / f"ready{r}", b"")
            _wait_for([run_dir / f"ready{q}" for q in range(cfg.ep)], 120, f"rank {r} waiting for peers to load")
            ms = {"fwd": 0.0, "bwd": 0.0}
            for _ in range(args.iterations):
                for d in ("fwd", "bwd"):
                    ms[d] = group.run(d, timeout_s=args.timeout, trace=args.trace)[r]
            out = {name: group.read_standard(r, slot) for name, slot in OUTPUTS.items()}
            if args.trace:
                out.update({f"trace_{d}": group.trace(r, d) for d in ("fwd", "bwd")})
            np.savez(run_dir / f"out{r}.npz", ms_fwd=ms["fwd"], ms_bwd=ms["bwd"], **out)
        return 0
    except HpmoeError as exc:
        print(f"rank {r}: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
