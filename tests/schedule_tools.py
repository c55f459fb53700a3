"""Helpers for tests that inspect or break compiled schedules."""
from __future__ import annotations

import numpy as np

from hpmoe.compiler import RankSchedule, compile_schedules
from hpmoe.config import MoeConfig
from hpmoe.ssc_format import QUEUE_DTYPE, QueueType


def compile_group(cfg: MoeConfig, direction: str) -> list[RankSchedule]:
    return compile_schedules(cfg, [direction], list(range(cfg.ep)))


def set_queues(s: RankSchedule, queues: list[tuple[int, list[int]]]) -> None:
    """Replace every queue: [(queue_type, task indices), ...], AIC workers first."""
    records, entries = [], []
    counters = {QueueType.CTQ: 0, QueueType.VTQ: 0, QueueType.POOL: 0}
    for qtype, tasks in queues:
        records.append((qtype, counters[QueueType(qtype)], len(entries), len(tasks)))
        counters[QueueType(qtype)] += 1
        entries.extend(tasks)
    s.queues = np.array(records, QUEUE_DTYPE)
    s.entries = np.array(entries, np.dtype("<u4"))


def queues_of(s: RankSchedule) -> list[tuple[int, list[int]]]:
    return [(int(q["queue_type"]), s.queue_tasks(i).tolist()) for i, q in enumerate(s.queues)]
