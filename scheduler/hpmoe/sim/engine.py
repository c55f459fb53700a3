"""Discrete-event simulation of worker queues with event counters, exactly as the runtime consumes an SSC.

Every worker walks its queue in order: fetch the next Task Descriptor (dispatch cost), wait until each of its
(up to two) dependent events has reached its threshold, run (duration from the cost model), then increment each
triggered counter (on its own rank or, through put_mem_signal, on another). A worker blocked on an event resumes
event_poll_us after the counter reaches its threshold. One invocation is simulated, so thresholds are absolute.

If the heap runs dry while some worker still has tasks, the schedule deadlocks: SimDeadlock names the blocked
workers and the counters they wait on instead of hanging.
"""
from __future__ import annotations

import dataclasses
import heapq
from typing import Callable, Protocol

import numpy as np

from ..errors import HpmoeError

_FETCHED, _DONE, _RESUME = 0, 1, 2


class SimDeadlock(HpmoeError):
    """The simulated schedule cannot finish: workers wait on counters that never reach their thresholds."""


class CostModel(Protocol):
    def dispatch_us(self, task: int) -> float: ...
    def start(self, task: int, now: float) -> float: ...
    def finish(self, task: int, now: float) -> None: ...


@dataclasses.dataclass
class EngineResult:
    start: np.ndarray           # us, per task
    end: np.ndarray
    worker: np.ndarray          # index into the workers list
    event_time: np.ndarray      # when each counter reached its threshold (nan if never)
    worker_end: np.ndarray      # when each worker finished its queue


def run(num_tasks: int, waits: np.ndarray, triggers: np.ndarray, thresholds: np.ndarray,
        queues: list[np.ndarray], cost: CostModel, *, t0: float = 0.0, poll_us: float = 0.0,
        describe: Callable[[int, int], str] | None = None,
        describe_event: Callable[[int], str] | None = None) -> EngineResult:
    """Simulate `queues` (global task ids per worker) to completion; raises SimDeadlock if they cannot finish."""
    start = np.full(num_tasks, np.nan)
    end = np.full(num_tasks, np.nan)
    worker_of = np.full(num_tasks, -1, dtype=np.int64)
    count = np.zeros(len(thresholds), dtype=np.int64)
    event_time = np.full(len(thresholds), np.nan)
    reached = thresholds <= 0
    event_time[reached] = t0
    blocked: dict[int, list[int]] = {}
    ptr = [0] * len(queues)
    fetched_at = [0.0] * len(queues)
    worker_end = np.full(len(queues), np.nan)
    waits_l = waits.tolist()
    trig_l = triggers.tolist()
    queues_l = [q.tolist() for q in queues]
    heap: list[tuple[float, int, int, int]] = []
    seq = 0

    def fetch(w: int, now: float) -> None:
        nonlocal seq
        q = queues_l[w]
        if ptr[w] >= len(q):
            worker_end[w] = now
            return
        task = q[ptr[w]]
        seq += 1
        heapq.heappush(heap, (now + cost.dispatch_us(task), seq, _FETCHED, w))

    def try_start(w: int, now: float) -> None:
        nonlocal seq
        task = queues_l[w][ptr[w]]
        for e in waits_l[task]:
            if e >= 0 and not reached[e]:
                blocked.setdefault(e, []).append(w)
                return
        start[task] = now
        worker_of[task] = w
        seq += 1
        heapq.heappush(heap, (cost.start(task, now), seq, _DONE, w))

    for w in range(len(queues)):
        fetch(w, t0)
    while heap:
        now, _, kind, w = heapq.heappop(heap)
        if kind == _FETCHED:
            fetched_at[w] = now
            try_start(w, now)
        elif kind == _RESUME:
            try_start(w, max(now, fetched_at[w]))
        else:
            task = queues_l[w][ptr[w]]
            end[task] = now
            cost.finish(task, now)
            for e in trig_l[task]:
                if e < 0:
                    continue
                count[e] += 1
                if count[e] == thresholds[e]:
                    reached[e] = True
                    event_time[e] = now
                    for bw in blocked.pop(e, ()):
                        seq += 1
                        heapq.heappush(heap, (now + poll_us, seq, _RESUME, bw))
            ptr[w] += 1
            fetch(w, now)
    stuck = [w for w in range(len(queues)) if ptr[w] < len(queues_l[w])]
    if stuck:
        raise SimDeadlock(_deadlock_message(stuck, queues_l, ptr, waits_l, triggers, count, thresholds, reached,
                                            end, describe, describe_event))
    if np.isnan(start).any():
        missing = int(np.flatnonzero(np.isnan(start))[0])
        raise SimDeadlock(f"task {missing} is in no worker queue and never runs")
    return EngineResult(start, end, worker_of, event_time, worker_end)


def _deadlock_message(stuck, queues_l, ptr, waits_l, triggers, count, thresholds, reached, end, describe,
                      describe_event) -> str:
    """Name the starved counters (every producer ran, threshold unmet) or a wait-for cycle between workers."""
    name = describe_event or (lambda e: f"counter {e}")
    holder = {t: w for w in stuck for t in queues_l[w][ptr[w]:]}
    blocked_on, waits_for = {}, {}
    for w in stuck:
        task = queues_l[w][ptr[w]]
        ev = [e for e in waits_l[task] if e >= 0 and not reached[e]]
        blocked_on[w] = ev[0] if ev else -1
    pending: dict[int, list[int]] = {e: [] for e in set(blocked_on.values()) if e >= 0}
    for t in np.flatnonzero(np.isnan(end)).tolist():
        for e in triggers[t].tolist():
            if e in pending:
                pending[e].append(t)
    for w, e in blocked_on.items():
        waits_for[w] = sorted({holder[t] for t in pending.get(e, []) if t in holder})

    def what(w: int) -> str:
        task = queues_l[w][ptr[w]]
        who = describe(w, task) if describe else f"worker {w} task {task}"
        e = blocked_on[w]
        return f"{who} waits on {name(e)} ({count[e]}/{thresholds[e]})" if e >= 0 else who

    starved = sorted(e for e, producers in pending.items() if not producers)
    head = f"deadlock: {len(stuck)} worker(s) blocked forever; "
    if starved:
        return head + "; ".join(f"{name(e)} stays at {count[e]}/{thresholds[e]} with no producer left"
                                for e in starved[:3])
    for w0 in stuck:                     # follow the first wait-for edge until a worker repeats
        path, seen, w = [], set(), w0
        while w not in seen and waits_for.get(w):
            seen.add(w)
            path.append(w)
            w = waits_for[w][0]
        if w in seen:
            cycle = path[path.index(w):]
            return head + "cycle: " + " -> ".join(what(x) for x in cycle) + " -> (first again)"
    return head + "; ".join(what(w) for w in stuck[:3])
