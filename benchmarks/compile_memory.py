"""Peak memory and time of a compile per task, next to the estimate `hpmoe.limits` refuses configs with.

    python benchmarks/compile_memory.py --preset deepseek-v3 --ep 16            # whole group
    python benchmarks/compile_memory.py --preset deepseek-v3 --ep 64 --rank 0   # one rank

Each case runs in a fresh process (peak RSS only grows), so run the script once per case. It prints the
measured peak-RSS growth per scheduled task and seconds per task, and the constants limits.py assumes; the
estimate must stay above the measurement (a config it lets through must fit).
"""
from __future__ import annotations

import argparse
import resource
import time

from hpmoe import limits
from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="deepseek-v3")
    p.add_argument("--ep", type=int, default=16)
    p.add_argument("--rank", type=int, help="compile this rank only (default: the whole group)")
    args = p.parse_args()
    cfg = make_config(args.preset, {"ep": args.ep})
    ranks = [args.rank] if args.rank is not None else list(range(cfg.ep))
    estimated_tasks = limits.tasks_per_rank(cfg) * len(ranks)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    schedules = compile_schedules(cfg, ["fwd", "bwd"], ranks)
    seconds = time.perf_counter() - start
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    tasks = sum(len(s.tasks) for s in schedules)
    print(f"{args.preset} ep={cfg.ep} ranks={len(ranks)}: {tasks} tasks (estimate {estimated_tasks}), "
          f"{seconds:.2f} s, peak RSS +{grown / 2**20:.1f} MiB")
    print(f"measured  {grown / tasks:7.0f} B/task  {seconds / tasks * 1e6:6.1f} us/task")
    print(f"limits.py {limits.COMPILE_BYTES_PER_TASK:7d} B/task  {limits.SCHEDULE_SECONDS_PER_TASK * 1e6:6.1f} "
          f"us/task (+ {limits.FILL_SECONDS_PER_VISIT * 1e6:.1f} us per rank x task visit)")


if __name__ == "__main__":
    main()
