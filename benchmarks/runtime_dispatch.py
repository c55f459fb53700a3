"""Static vs dynamic dispatch on the CPU twin, measured in the same run on the same taskflow.

Per-task overhead: handlers that do nothing (puts still signal), so a launch's wall time is pure dispatch:
fetch TD, wait on counters, call the handler, trigger. Per task = launch wall time / tasks in the launch
(all ranks), median over repeats; the launch includes starting the worker threads.
Static: the worker loop over each worker's SSC queue. Dynamic: per-rank ready queues that finished tasks push
into and idle workers pop from (op_host/cpu/dynamic_dispatch.cpp).

  .venv/bin/python benchmarks/runtime_dispatch.py [--ep 1] [--tokens 16384] [--repeats 15]
"""
from __future__ import annotations

import argparse
import statistics
import time

from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config
from hpmoe.runtime.routing import bucket_for, make_routing
from hpmoe.runtime.twin import CpuTwin, make_inputs


def time_launches(twin: CpuTwin, dynamic: bool, repeats: int) -> dict[str, float]:
    times = {"fwd": [], "bwd": []}
    for _ in range(repeats):
        for d in ("fwd", "bwd"):
            start = time.perf_counter()
            twin.run_threads(d, dynamic)
            times[d].append(time.perf_counter() - start)
    return {d: statistics.median(v) for d, v in times.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ep", type=int, default=1)
    p.add_argument("--tokens", type=int, default=16384)
    p.add_argument("--workers-aic", type=int, default=1)
    p.add_argument("--workers-aiv", type=int, default=1)
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args()
    cfg = make_config("small", dict(ep=args.ep, tokens=args.tokens, experts_per_rank=4, num_aic=args.workers_aic,
                                    num_aiv=args.workers_aiv))
    ids, weights = make_routing(cfg, "balanced", 0)
    cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, ids))
    schedules = compile_schedules(cfg, ["fwd", "bwd"], list(range(cfg.ep)))
    tasks = {d: sum(len(s.tasks) for s in schedules if s.direction_name == d) for d in ("fwd", "bwd")}
    print(f"config: ep={cfg.ep} tokens={cfg.tokens} tile_m={cfg.tile_m} C={cfg.recv_rows_per_src} "
          f"workers/rank={cfg.num_aic}+{cfg.num_aiv}; tasks fwd={tasks['fwd']} bwd={tasks['bwd']} (all ranks)")
    with CpuTwin(cfg, schedules, handlers="null", timeout_s=60) as twin:
        twin.load_inputs(make_inputs(cfg, ids, weights, 0))
        time_launches(twin, False, 2)  # warm-up
        static = time_launches(twin, False, args.repeats)
        dynamic = time_launches(twin, True, args.repeats)
    for d in ("fwd", "bwd"):
        s_us, d_us = static[d] / tasks[d] * 1e6, dynamic[d] / tasks[d] * 1e6
        print(f"{d}: static {s_us:.3f} us/task ({static[d] * 1e3:.2f} ms/launch), dynamic {d_us:.3f} us/task "
              f"({dynamic[d] * 1e3:.2f} ms/launch), static/dynamic = {s_us / d_us:.2f}")


if __name__ == "__main__":
    main()
