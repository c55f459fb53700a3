"""The command line of `hpmoe tune --backend cuda` (registered with the A3 tuner in sim/cli.py)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from .. import limits, tuning_cache
from ..cli import config_from_args
from ..errors import HpmoeError
from ..runtime.routing import ROUTINGS
from .native import gpu_unavailable_reason
from .tune import GpuMeasurer, gpu_name, tune_cuda

CUDA_WORKERS = (112, 20)  # H100 / H200: 132 SMs, one block each (docs/cuda.md)


def cmd_tune_cuda(args: argparse.Namespace) -> int:
    reason = gpu_unavailable_reason()
    if reason:
        raise HpmoeError(f"--backend cuda measures on a GPU: {reason}")
    if args.routing not in ROUTINGS:
        raise HpmoeError(f"--backend cuda draws routing as `hpmoe run` does: --routing one of {', '.join(ROUTINGS)}")
    cfg = config_from_args(args)
    # As `hpmoe run --backend cuda`, and the row tile MoEFFN starts from (128: the GMM tile's height).
    defaults = {"mixed_queues": True, "claim_pool": True, "tile_m": 128}
    if args.num_aic is None and args.num_aiv is None:
        defaults.update(num_aic=CUDA_WORKERS[0], num_aiv=CUDA_WORKERS[1])
    cfg = cfg.replace(**{k: v for k, v in defaults.items() if getattr(args, k, None) is None})
    limits.check_compile(cfg, cfg.ep)
    devices = list(args.devices) if args.devices else list(range(cfg.ep))
    if len(devices) != cfg.ep:
        devices = [devices[r % len(devices)] for r in range(cfg.ep)]
    cache = Path(args.cache) if args.cache else None
    gpu = gpu_name(devices[0])
    key = tuning_cache.shape_key(cfg)
    print(f"measuring schedules for {key} on {gpu} (GPUs {devices}), routing={args.routing}, "
          f"median of {args.iterations} fwd+bwd launches each after {args.warm_seconds:g} s of untimed ones")
    print("drawing the routing and inputs once for every candidate ...", flush=True)
    measurer = GpuMeasurer(cfg, devices, iterations=args.iterations, routing=args.routing, warm_s=args.warm_seconds)
    res = tune_cuda(cfg, measurer, rounds=args.rounds, log=lambda line: print(line, flush=True))
    params = lambda t: " ".join(f"{k}={v}" for k, v in t.params.items())  # noqa: E731
    print(f"start : {params(res.start)}: {res.start.ms:.3f} ms")
    print(f"chosen: {params(res.best)}: {res.best.ms:.3f} ms ({res.start.ms / res.best.ms:.3f}x) over "
          f"{len(res.tried)} candidates")
    path = tuning_cache.store(key, gpu, res.best_cfg, res.best.ms, cache)
    print(f"cached -> {path} [{gpu!r}][{key!r}]")
    if args.output:
        Path(args.output).write_text(json.dumps(res.best_cfg.to_json(), indent=2) + "\n")
        print(f"config -> {args.output} (use with --config)")
    return 0
