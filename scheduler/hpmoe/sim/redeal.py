"""What-if experiment: deal each queue type to workers by expected work instead of round-robin.

The SSC deals one order per queue type round-robin (ordering.py). When expected-empty tiles (capacity slack) recur
with a period that shares a factor with the worker count, whole workers get mostly empty tiles while others get
full ones. This re-deals the same global order greedily: the next task goes to the worker whose expected work so
far is smallest, where expected work is the task's time under *balanced* routing (what a compiler can know). Each
worker's queue stays a subsequence of the original order. The result is a simulator-side experiment, not what the
SSC holds; a deadlock it might cause would be reported by the engine.
"""
from __future__ import annotations

import heapq

import numpy as np

from .hw import Hardware
from .workload import Workload


def global_order(queues: list[np.ndarray]) -> list[int]:
    """Undo round-robin dealing: task j of the type's order sat at queue j % W, position j // W."""
    order = []
    longest = max((len(q) for q in queues), default=0)
    for pos in range(longest):
        for q in queues:
            if pos < len(q):
                order.append(int(q[pos]))
    return order


def expected_us(wl: Workload, hw: Hardware) -> np.ndarray:
    put = np.where(wl.put_bytes > 0, wl.put_bytes, 0.0) / hw.link_bytes_per_us
    return wl.compute_us + put + hw.static_dispatch_us


def redeal(wl: Workload, expected: np.ndarray) -> list:
    """New workers list: same (rank, unit, index) lanes, queues dealt greedily by expected work."""
    out = []
    groups: dict[tuple[int, int], list] = {}
    for w in wl.workers:
        groups.setdefault((w[0], w[1]), []).append(w)
    for (rank, unit), lanes in groups.items():
        order = global_order([w[3] for w in lanes])
        heap = [(0.0, i) for i in range(len(lanes))]
        queues: list[list[int]] = [[] for _ in lanes]
        for t in order:
            load, i = heapq.heappop(heap)
            queues[i].append(t)
            heapq.heappush(heap, (load + float(expected[t]), i))
        out += [(rank, unit, lane[2], np.array(q, dtype=np.int64)) for lane, q in zip(lanes, queues)]
    return out
