"""Human summaries and full JSON dumps of SSC schedules (`hpmoe inspect`)."""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from .compiler import RankSchedule
from .ssc_format import NO_EVENT, NO_SLOT, QueueType, Slot, TaskType


def queue_stats(s: RankSchedule) -> dict[str, dict[str, int]]:
    stats = {}
    for qtype in QueueType:
        sizes = [int(q["count"]) for q in s.queues if int(q["queue_type"]) == qtype]
        stats[qtype.name] = {"tasks": sum(sizes), "workers": len(sizes), "max_per_worker": max(sizes, default=0)}
    return stats


def summary_line(s: RankSchedule, nbytes: int | None = None) -> str:
    q = queue_stats(s)
    size = f", {nbytes} bytes" if nbytes is not None else ""
    pool = (f", pool {q['POOL']['tasks']} tasks claimed by {s.cfg.pool_claimers} workers" if q["POOL"]["workers"]
            else "")  # the cube-queue workers, with mixed queues and no row pipelines all of them
    return (f"rank {s.rank} {s.direction_name}: CTQ {q['CTQ']['tasks']} tasks on {q['CTQ']['workers']} AIC, "
            f"VTQ {q['VTQ']['tasks']} tasks on {q['VTQ']['workers']} AIV{pool}, {len(s.events)} events{size}")


def summary(s: RankSchedule, nbytes: int | None = None) -> str:
    lines = [summary_line(s, nbytes), "config: " + ", ".join(f"{k}={v}" for k, v in s.cfg.to_json().items())]
    types = Counter(TaskType(int(t)).name for t in s.tasks["task_type"])
    lines.append("tasks by type: " + ", ".join(f"{k} {v}" for k, v in sorted(types.items())))
    remote = int(np.count_nonzero(s.events["flags"] & 1))
    lines.append(f"events: {len(s.events)} ({remote} triggered from other ranks), "
                 f"threshold max {int(s.events['threshold'].max(initial=0))}")
    return "\n".join(lines)


def _ref_json(ref: np.void) -> dict[str, Any] | None:
    if int(ref["slot"]) == NO_SLOT:
        return None
    return {"slot": Slot(int(ref["slot"])).name.lower(), "flags": int(ref["flags"]), "rank": int(ref["rank"]),
            "rows": [int(ref["row_offset"]), int(ref["rows"])], "cols": [int(ref["col_offset"]), int(ref["cols"])]}


def to_json(s: RankSchedule) -> dict[str, Any]:
    tasks = []
    for t in s.tasks:
        tasks.append({
            "task_type": TaskType(int(t["task_type"])).name, "queue_type": QueueType(int(t["queue_type"])).name,
            "dependent_event": [int(e) for e in t["dependent_event"] if int(e) != NO_EVENT],
            "trigger": [[int(r), int(e)] for e, r in zip(t["trigger_event"], t["trigger_rank"]) if int(e) != NO_EVENT],
            "task_index": int(t["task_index"]), "task_split_num": int(t["task_split_num"]),
            "task_split_value": int(t["task_split_value"]), "tiling_data_position": int(t["tiling_data_position"]),
            "op_id": int(t["op_id"]), "peer": int(t["peer"]), "expert": int(t["expert"]),
            "inputs": [r for r in map(_ref_json, t["inputs"]) if r], "outputs": [r for r in map(_ref_json, t["outputs"]) if r],
        })
    return {
        "rank": s.rank, "direction": s.direction_name, "config": s.cfg.ssc_fields(),
        "tensors": [{"slot": Slot(int(t["slot"])).name.lower(), "role": int(t["role"]), "dtype": int(t["dtype"]),
                     "flags": int(t["flags"]), "shape": [int(d) for d in t["dims"][:int(t["ndim"])]],
                     "bytes": int(t["bytes"])} for t in s.tensors],
        "tasks": tasks,
        "events": [{"threshold": int(e["threshold"]), "flags": int(e["flags"]), "op_id": int(e["op_id"])}
                   for e in s.events],
        "queues": [{"queue_type": QueueType(int(q["queue_type"])).name, "worker": int(q["worker"]),
                    "tasks": [int(i) for i in s.queue_tasks(qi)]} for qi, q in enumerate(s.queues)],
        "tilings": [{k: int(v) for k, v in zip(("op_id", "task_type", "m", "n", "k", "experts"), rec)}
                    for rec in s.tilings],
    }
