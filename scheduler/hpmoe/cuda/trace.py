"""Chrome / Perfetto trace of a measured CUDA launch, in the layout of `hpmoe simulate --trace`: one process
per (direction, rank), one lane per worker ("AIC w" = cube-role block, "AIV w" = vector-role block), each
task a complete event. Times are microseconds of the GPU's global timer from the earliest task start of that
direction on any rank (ranks on one host share the timer's epoch only approximately: compare lanes within a
rank)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..compiler import RankSchedule
from ..ssc_format import NO_EVENT, TaskType

UNIT = ("AIC", "AIV")
TRACE_WORDS = 3  # per task: start, end (global-timer ns), the worker that ran it (device_rank.cuh kTraceWords)


def trace_events(schedules: list[RankSchedule], stamps: dict[tuple[str, int], np.ndarray]) -> list[dict]:
    """stamps[(direction, rank)]: [num_tasks, TRACE_WORDS] of that rank's last traced launch. Each task goes on
    the lane of the worker that ran it, a claimed pool unit too (marked "pool"). ValueError, naming the task,
    when a record names a worker the schedule does not have."""
    events: list[dict] = []
    by_dir: dict[str, list[RankSchedule]] = {}
    for s in schedules:
        if (s.direction_name, s.rank) in stamps:
            by_dir.setdefault(s.direction_name, []).append(s)
    for di, (d, group) in enumerate(sorted(by_dir.items())):
        for s in group:
            shape = stamps[(d, s.rank)].shape
            if shape != (len(s.tasks), TRACE_WORDS):
                raise ValueError(f"trace of {d} rank {s.rank}: stamps of shape {shape}, the schedule needs "
                                 f"({len(s.tasks)}, {TRACE_WORDS})")
        starts = [stamps[(d, s.rank)][:, 0] for s in group]
        origin = min(int(x[x > 0].min()) for x in starts if np.any(x > 0)) if any(np.any(x > 0) for x in starts) else 0
        ready = _inputs_ready(group, {s.rank: stamps[(d, s.rank)] for s in group})
        for s in group:
            pid = di * 10000 + s.rank
            events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"{d} rank {s.rank} (GPU)"}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}})
            workers = s.cfg.num_aic + s.cfg.num_aiv
            for q in range(workers):
                tid, name = _lane(s, q)
                events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
            pool = {t for q in range(workers, len(s.queues)) for t in s.queue_tasks(q).tolist()}
            for t, (b, e, worker) in enumerate(stamps[(d, s.rank)].tolist()):
                if b == 0 or e < b:
                    continue  # not run (a failed launch) or not stamped
                if worker >= workers:
                    raise ValueError(f"trace of {d} rank {s.rank}: task {t} names worker {worker}, the schedule has "
                                     f"{workers}")
                events.append(_task_event(s, t, pid, _lane(s, worker)[0], b, e, origin, ready[s.rank],
                                          **({"pool": True} if t in pool else {})))
    return events


def _lane(s: RankSchedule, worker: int) -> tuple[int, str]:
    """A worker's trace lane: its tid (cube-role blocks 0.., vector-role blocks 1000..) and name ("AIC 3")."""
    unit, index = (0, worker) if worker < s.cfg.num_aic else (1, worker - s.cfg.num_aic)
    return unit * 1000 + index, f"{UNIT[unit]} {index}"


def _inputs_ready(group: list[RankSchedule], stamps: dict[int, np.ndarray]) -> dict[int, dict[int, int]]:
    """rank -> {task: the stamp (ns) at which the last task triggering one of its events ended}, for the tasks
    with waits whose producers (on any rank of the direction) all ran. A producer's end stamp precedes its
    signal, so this is when the inputs were written, a little before the counter said so. A gap before a task
    that started well after this time was not a wait on its inputs (cuda_trace_summary.py splits the two)."""
    last: dict[tuple[int, int], int] = {}  # (rank, event) -> latest end of its producers; -1: one did not run
    for s in group:
        ends = stamps[s.rank][:, 1].astype(np.int64)
        runs = (stamps[s.rank][:, 0] != 0) & (stamps[s.rank][:, 1] >= stamps[s.rank][:, 0])
        for t, (events, ranks) in enumerate(zip(s.tasks["trigger_event"].tolist(), s.tasks["trigger_rank"].tolist())):
            for event, rank in zip(events, ranks):
                if event != NO_EVENT:
                    key = (rank, event)
                    last[key] = -1 if last.get(key) == -1 or not runs[t] else max(last.get(key, 0), int(ends[t]))
    ready: dict[int, dict[int, int]] = {}
    for s in group:
        mine = ready[s.rank] = {}
        for t, waits in enumerate(s.tasks["dependent_event"].tolist()):
            producers = [last.get((s.rank, e), -1) for e in waits if e != NO_EVENT]
            if producers and min(producers) > 0:
                mine[t] = max(producers)
    return ready


def _task_event(s: RankSchedule, t: int, pid: int, tid: int, b: int, e: int, origin: int, ready: dict[int, int],
                **extra) -> dict:
    """One complete event; args.ready: when its inputs were all there (us on the trace's clock), if known."""
    args = {"task": t, "peer": int(s.tasks[t]["peer"]), **extra}
    if t in ready:
        args["ready"] = round((ready[t] - origin) / 1000.0, 3)
    return {"ph": "X", "name": TaskType(int(s.tasks[t]["task_type"])).name, "pid": pid, "tid": tid,
            "ts": round((b - origin) / 1000.0, 3), "dur": round((e - b) / 1000.0, 3), "args": args}


def write_trace(path: str | Path, schedules: list[RankSchedule], stamps: dict[tuple[str, int], np.ndarray]) -> None:
    Path(path).write_text(json.dumps({"traceEvents": trace_events(schedules, stamps), "displayTimeUnit": "ms"}))
