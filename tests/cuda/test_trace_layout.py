"""The GPU trace writer on made-up stamps (no GPU needed): every stamped task appears once, on its worker's
lane; claimed pool tasks go on an AIC lane that was free when they started."""
from __future__ import annotations

import numpy as np

from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config
from hpmoe.cuda.trace import trace_events
from hpmoe.ssc_format import QueueType


def test_every_task_once_and_pool_tasks_on_free_aic_lanes():
    cfg = make_config("small", {"ep": 2, "claim_pool": True})
    schedules = compile_schedules(cfg, ["bwd"], [0, 1])
    stamps = {}
    for s in schedules:
        st = np.zeros((len(s.tasks), 2), np.uint64)
        clock = 1000
        for q in range(cfg.num_aic + cfg.num_aiv):  # workers one after another, 10 ns per task
            for t in s.queue_tasks(q).tolist():
                st[t] = (clock, clock + 10)
                clock += 10
        for q in range(cfg.num_aic + cfg.num_aiv, len(s.queues)):  # pool after everything: AIC lanes are free
            for t in s.queue_tasks(q).tolist():
                st[t] = (clock, clock + 10)
                clock += 10
        stamps[("bwd", s.rank)] = st
    events = [e for e in trace_events(schedules, stamps) if e["ph"] == "X"]
    for s in schedules:
        mine = [e for e in events if e["pid"] == s.rank]
        assert sorted(e["args"]["task"] for e in mine) == list(range(len(s.tasks)))
        pool = {t for q in range(cfg.num_aic + cfg.num_aiv, len(s.queues)) for t in s.queue_tasks(q).tolist()}
        assert int(s.queues[-1]["queue_type"]) == QueueType.POOL and pool
        for e in mine:
            if e["args"]["task"] in pool:
                assert e["args"].get("pool") and e["tid"] < cfg.num_aic, e
