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
UNPLACED_LANE = 1999  # pool units that overlap every claimer lane's own work (stamps of a failed launch)


def trace_events(schedules: list[RankSchedule], stamps: dict[tuple[str, int], np.ndarray]) -> list[dict]:
    """stamps[(direction, rank)]: [num_tasks, 2] start/end ns of that rank's last traced launch."""
    events: list[dict] = []
    by_dir: dict[str, list[RankSchedule]] = {}
    for s in schedules:
        if (s.direction_name, s.rank) in stamps:
            by_dir.setdefault(s.direction_name, []).append(s)
    for di, (d, group) in enumerate(sorted(by_dir.items())):
        starts = [stamps[(d, s.rank)][:, 0] for s in group]
        origin = min(int(x[x > 0].min()) for x in starts if np.any(x > 0)) if any(np.any(x > 0) for x in starts) else 0
        ready = _inputs_ready(group, {s.rank: stamps[(d, s.rank)] for s in group})
        for s in group:
            pid = di * 10000 + s.rank
            num_aic = s.cfg.num_aic
            events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"{d} rank {s.rank} (GPU)"}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}})
            st = stamps[(d, s.rank)]
            workers = s.cfg.num_aic + s.cfg.num_aiv
            # Claimer lane -> end of its last task: where a claimed pool unit can have run (the claimers:
            # MoeConfig.pool_claimers). A claimer whose own queue is empty (row pipelines) claims from the
            # start, so every claimer lane starts free.
            claimers = s.cfg.pool_claimers if s.cfg.claim_pool else 0
            last_end: dict[int, int] = {}
            for q in range(workers):
                unit, idx = (0, q) if q < num_aic else (1, q - num_aic)
                tid = unit * 1000 + idx
                if q < claimers:
                    last_end[tid] = 0
                events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                               "args": {"name": f"{UNIT[unit]} {idx}"}})
                for t in s.queue_tasks(q).tolist():
                    b, e = int(st[t, 0]), int(st[t, 1])
                    if b == 0 or e < b:
                        continue  # not run (a failed launch) or not stamped
                    if tid in last_end:
                        last_end[tid] = max(last_end[tid], e)
                    events.append(_task_event(s, t, pid, tid, b, e, origin, ready[s.rank]))
            events.extend(_pool_events(s, st, origin, pid, last_end, ready[s.rank]))
    return events


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


def _pool_events(s: RankSchedule, st: np.ndarray, origin: int, pid: int, last_end: dict,
                 ready: dict[int, int]) -> list[dict]:
    """Claimed units carry no worker id: each goes, whole, on the claimer lane that finished last before the
    unit started (a claimer runs its units one after another, after its own queue), marked "pool"."""
    units = []
    for q in range(s.cfg.num_aic + s.cfg.num_aiv, len(s.queues)):
        ran = [t for t in s.queue_tasks(q).tolist() if int(st[t, 0]) != 0 and int(st[t, 1]) >= int(st[t, 0])]
        if ran:
            units.append((min(int(st[t, 0]) for t in ran), ran))
    out = []
    for first, ran in sorted(units, key=lambda u: u[0]):
        free = [(end, tid) for tid, end in last_end.items() if end <= first]
        if not free and UNPLACED_LANE not in last_end:  # an overlap the lanes cannot place: a lane of its own
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": UNPLACED_LANE,
                        "args": {"name": "pool (unplaced)"}})
        tid = max(free)[1] if free else UNPLACED_LANE
        for t in ran:
            b, e = int(st[t, 0]), int(st[t, 1])
            last_end[tid] = max(last_end.get(tid, 0), e)
            out.append(_task_event(s, t, pid, tid, b, e, origin, ready, pool=True))
    return out


def write_trace(path: str | Path, schedules: list[RankSchedule], stamps: dict[tuple[str, int], np.ndarray]) -> None:
    Path(path).write_text(json.dumps({"traceEvents": trace_events(schedules, stamps), "displayTimeUnit": "ms"}))
