"""Chrome / Perfetto trace JSON of a prediction: one process per (direction, rank), one lane per worker.

Lanes: "AIC w" and "AIV w" for every worker (each task a complete event, with its rows, peer, expert and L2 hit
bytes), "link out" for the rank's egress reservations, and one process per direction for the kernel-by-kernel
baseline (a lane per rank). Times are predicted microseconds from the start of each direction's launch.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..ssc_format import TaskType
from .api import Prediction

UNIT = ("AIC", "AIV")


def trace_events(pred: Prediction) -> list[dict]:
    events: list[dict] = []
    for di, (d, res) in enumerate(pred.fused.items()):
        wl = res.workload
        for r in range(wl.ep):
            pid = di * 10000 + r
            events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"{d} rank {r} (predicted)"}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}})
        tids = {}
        for w, (rank, unit, idx, _) in enumerate(wl.workers):
            tid = unit * 1000 + idx
            tids[w] = tid
            events.append({"ph": "M", "name": "thread_name", "pid": di * 10000 + rank, "tid": tid,
                           "args": {"name": f"{UNIT[unit]} {idx}"}})
        rank = wl.rank.tolist()
        start, end, worker = res.start.tolist(), res.end.tolist(), res.worker.tolist()
        ttype, local = wl.task_type.tolist(), wl.local.tolist()
        rows, dst = wl.valid_rows.tolist(), wl.put_dst.tolist()
        for t in range(wl.num_tasks):
            args = {"task": local[t], "rows": rows[t]}
            if dst[t] >= 0:
                args["dst"] = dst[t]
            events.append({"ph": "X", "name": TaskType(ttype[t]).name, "pid": di * 10000 + rank[t],
                           "tid": tids[worker[t]], "ts": round(start[t], 3), "dur": round(end[t] - start[t], 3),
                           "args": args})
        for r, busy in enumerate(res.link_busy):
            pid = di * 10000 + r
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 9000, "args": {"name": "link out"}})
            for s, e, to in busy:
                events.append({"ph": "X", "name": f"to {to}", "pid": pid, "tid": 9000, "ts": round(s, 3),
                               "dur": round(e - s, 3)})
        b = pred.baseline.get(d)
        if b is not None:
            pid = di * 10000 + 9999
            events.append({"ph": "M", "name": "process_name", "pid": pid,
                           "args": {"name": f"{d} kernel-by-kernel baseline (predicted)"}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}})
            for r in range(len(b.rank_latency_us)):
                events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": r, "args": {"name": f"rank {r}"}})
            for op in b.ops:
                for r in range(len(op.start_us)):
                    events.append({"ph": "X", "name": op.name, "pid": pid, "tid": r, "ts": round(float(op.start_us[r]), 3),
                                   "dur": round(float(op.duration_us[r]), 3), "args": {"kind": op.kind}})
    return events


def write_trace(pred: Prediction, path: str | Path) -> int:
    doc = {"traceEvents": trace_events(pred), "displayTimeUnit": "ms",
           "otherData": {"note": "PREDICTED by the hpmoe Ascend A3 performance model; not a measurement",
                         "hardware": pred.hw.name, "routing": pred.routing}}
    text = json.dumps(doc, separators=(",", ":"))
    Path(path).write_text(text)
    return len(doc["traceEvents"])
