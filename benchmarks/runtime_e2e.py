"""End-to-end forward+backward on the CPU twin (ranks as thread groups) vs numpy run kernel by kernel on the
same cores, static and dynamic dispatch in the same run.

numpy baselines: scheduler/hpmoe/reference.py (expert by expert: gather, GMM1, SwiGLU, GMM2, weighted
scatter-add, and the backward kernels), once in float64 (the reference as shipped) and once with every array
in float32 (what the twin computes in). Times are medians over repeats; the twin's include thread start-up.

  .venv/bin/python benchmarks/runtime_e2e.py --preset small
  .venv/bin/python benchmarks/runtime_e2e.py --mid
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config
from hpmoe.reference import moe_reference
from hpmoe.runtime.routing import bucket_for, make_routing
from hpmoe.runtime.tolerances import compare
from hpmoe.runtime.twin import CpuTwin, make_inputs

MID = dict(ep=4, tokens=512, hidden=512, inter=256, experts_per_rank=4, topk=4, dtype="fp32", tile_m=64,
           wgrad_tile=64, token_tile=64, num_aic=2, num_aiv=2)


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="small")
    p.add_argument("--mid", action="store_true", help=f"mid-size config {MID}")
    p.add_argument("--dtype", default=None)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    overrides = dict(MID) if args.mid else {}
    if args.dtype:
        overrides["dtype"] = args.dtype
    cfg = make_config(None if args.mid else args.preset, overrides)
    ids, weights = make_routing(cfg, "random", 0)
    cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, ids))
    inputs = make_inputs(cfg, ids, weights, 0)
    args_np = (inputs.x, inputs.w1, inputs.w2, inputs.topk_ids, inputs.topk_weights, inputs.dy)
    f32 = tuple(a.astype(np.float32) if a.dtype == np.float64 else a for a in args_np)
    ref = moe_reference(*args_np)
    t_ref64 = median_time(lambda: moe_reference(*args_np), args.repeats)
    t_ref32 = median_time(lambda: moe_reference(*f32, dtype=np.float32), args.repeats)
    schedules = compile_schedules(cfg, ["fwd", "bwd"], list(range(cfg.ep)))
    with CpuTwin(cfg, schedules, timeout_s=120) as twin:
        twin.load_inputs(inputs)

        def step(dynamic):
            twin.run_threads("fwd", dynamic)
            twin.run_threads("bwd", dynamic)

        step(False)
        t_static = median_time(lambda: step(False), args.repeats)
        t_dynamic = median_time(lambda: step(True), args.repeats)
        worst = max(err / tol for _, err, tol, _ in compare(twin.outputs(), ref, cfg.dtype))
    print(f"config: ep={cfg.ep} T={cfg.tokens} h={cfg.hidden} I={cfg.inter} E={cfg.experts_per_rank} "
          f"k={cfg.topk} {cfg.dtype} C={cfg.recv_rows_per_src} workers/rank={cfg.num_aic}+{cfg.num_aiv}; "
          f"outputs within tolerance (worst err/tol {worst:.2g})")
    print(f"hpmoe twin fwd+bwd: static {t_static * 1e3:.1f} ms, dynamic {t_dynamic * 1e3:.1f} ms "
          f"(static/dynamic {t_static / t_dynamic:.2f})")
    print(f"numpy kernel-by-kernel fwd+bwd: float64 {t_ref64 * 1e3:.1f} ms, float32 {t_ref32 * 1e3:.1f} ms")
    print(f"ratio hpmoe(static)/numpy: vs float64 {t_static / t_ref64:.2f}, vs float32 {t_static / t_ref32:.2f}")


if __name__ == "__main__":
    main()
