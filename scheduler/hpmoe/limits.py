"""Size limits checked from the config alone, before anything is allocated or compiled.

A config can ask for more than any machine holds (`--ep 4096`, `--tokens 100000000`); without these checks
that shows up minutes later as swapping or an out-of-memory kill. Each estimate is a closed formula over the
config (task counts from the operator graphs' own split functions), so refusing takes microseconds. The
per-task constants were measured by benchmarks/compile_memory.py (peak RSS of `compile_schedules` (deepseek-v3 EP16:
58,112 tasks, about 1.5 KB each at peak; one rank of EP64: 2.1 KB)) and rounded up.
"""
from __future__ import annotations

import os
from pathlib import Path

from .config import MoeConfig
from .errors import ConfigError
from .graphs import build_graph, tensor_specs

COMPILE_BYTES_PER_TASK = 3 * 1024      # peak resident bytes per scheduled task (measured 1.5-2.2 KB)
SIMULATE_BYTES_PER_TASK = 6 * 1024     # the simulator keeps per-task timelines next to the compiled tasks
FILL_SECONDS_PER_VISIT = 1e-6          # fill walks every rank's tiles even for a one-rank compile
SCHEDULE_SECONDS_PER_TASK = 60e-6      # measured 53 us per task for a whole deepseek-v3 EP16 group
MAX_COMPILE_SECONDS = 3600.0           # beyond an hour a config is a typo, not a plan
MAX_TWIN_THREADS = 4096                # the CPU twin runs one thread per worker of every rank


def available_bytes() -> int:
    """Memory this process can still use: MemAvailable, capped by a cgroup limit where one is set."""
    limit = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                limit = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if limit is None:
        limit = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        text = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if text.isdigit():
            limit = min(limit, int(text))
    except OSError:
        pass
    return limit


def tasks_per_rank(cfg: MoeConfig) -> int:
    """Tasks of one rank, fwd + bwd, from the graphs' split functions (exact up to the reduce tiles)."""
    return sum(node.split.task_num_fn(cfg) for d in ("fwd", "bwd") for node in build_graph(cfg, d).nodes)


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def _refuse_if_over(what: str, need: int, extra: str = "") -> None:
    have = available_bytes()
    if need > have:
        raise ConfigError(f"{what} needs about {_gib(need)} of memory (estimated from the config{extra}); "
                          f"this machine has {_gib(have)} available")


def check_compile(cfg: MoeConfig, num_ranks: int, bytes_per_task: int = COMPILE_BYTES_PER_TASK) -> int:
    """Refuse a compile of `num_ranks` ranks that would not fit in memory or would run past an hour.
    Returns the estimated peak bytes (callers add their own)."""
    per_rank = tasks_per_rank(cfg)
    tasks = per_rank * num_ranks
    seconds = tasks * SCHEDULE_SECONDS_PER_TASK + per_rank * cfg.ep * FILL_SECONDS_PER_VISIT
    if seconds > MAX_COMPILE_SECONDS:
        raise ConfigError(f"compiling {num_ranks} rank(s) of this config would take about {seconds:.0f} s "
                          f"({tasks} tasks, {per_rank} per rank); the limit is {MAX_COMPILE_SECONDS:.0f} s")
    need = tasks * bytes_per_task
    _refuse_if_over(f"compiling {num_ranks} rank(s) ({tasks} tasks)", need)
    return need


def heap_bytes_per_rank(cfg: MoeConfig) -> int:
    return sum(spec.nbytes for spec in tensor_specs(cfg).values())


def check_run(cfg: MoeConfig) -> None:
    """`hpmoe run`: the group heap, float64 inputs, reference and outputs, worker scratch, and the compile."""
    workers = cfg.num_aic + cfg.num_aiv
    if cfg.ep * workers > MAX_TWIN_THREADS:
        raise ConfigError(f"the CPU twin would start {cfg.ep * workers} worker threads (ep {cfg.ep} x "
                          f"{workers} workers); the limit is {MAX_TWIN_THREADS}")
    T, h, inter, E, C = cfg.tokens, cfg.hidden, cfg.inter, cfg.experts_per_rank, cfg.recv_rows_per_src
    heap = cfg.ep * heap_bytes_per_rank(cfg)
    # x, dy, w1, w2 in float64; the reference and the float64 copies of the outputs hold as much again, twice.
    host = 3 * 8 * cfg.ep * (2 * T * h + 3 * E * h * inter + T * cfg.topk * 3 * inter)
    scratch = 4 * cfg.ep * workers * (3 * C * max(h, 2 * inter) + 2 * inter * h)
    # The random routings draw T x experts float64 keys per rank, with a few temporaries of that size.
    routing = 4 * 8 * T * cfg.num_experts + 3 * 8 * cfg.ep * T * cfg.topk
    compile_bytes = check_compile(cfg, cfg.ep)
    _refuse_if_over("running this config on the CPU twin", heap + host + scratch + routing + compile_bytes,
                    f": heap {_gib(heap)}, host arrays {_gib(host + routing)}, worker scratch {_gib(scratch)}")


def check_simulate(cfg: MoeConfig) -> None:
    check_compile(cfg, cfg.ep, SIMULATE_BYTES_PER_TASK)
