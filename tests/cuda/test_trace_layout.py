"""The GPU trace writer on made-up stamps (no GPU needed): every stamped task appears once, on its worker's
lane; claimed pool tasks go on an AIC lane that was free when they started; each task carries when the tasks
triggering its events had all ended."""
from __future__ import annotations

import numpy as np

from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config
from hpmoe.cuda.trace import UNPLACED_LANE, trace_events
from hpmoe.ssc_format import NO_EVENT, QueueType


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


def test_pool_units_claimed_from_the_start_share_the_aic_lanes_without_overlap():
    # Row pipelines leave some claimers' own queues empty (workers 4 and 5 here): they claim at once.
    cfg = make_config("small", {"ep": 2, "mixed_queues": True, "row_pipelines": True, "claim_pool": True,
                                "num_aic": 8, "num_aiv": 1})
    schedules = compile_schedules(cfg, ["fwd"], [0, 1])
    stamps = {}
    for s in schedules:
        st = np.zeros((len(s.tasks), 2), np.uint64)
        workers = cfg.num_aic + cfg.num_aiv
        clocks = [1000] * cfg.num_aic
        for q in range(workers):
            for t in s.queue_tasks(q).tolist():
                lane = min(q, cfg.num_aic - 1)
                st[t] = (clocks[lane], clocks[lane] + 10)
                clocks[lane] += 10
        for i, q in enumerate(range(workers, len(s.queues))):  # unit i on claimer i mod num_aic
            lane = i % cfg.num_aic
            for t in s.queue_tasks(q).tolist():
                st[t] = (clocks[lane], clocks[lane] + 10)
                clocks[lane] += 10
        stamps[("fwd", s.rank)] = st
    events = trace_events(schedules, stamps)
    named = {(e["pid"], e["tid"]) for e in events if e.get("name") == "thread_name"}
    tasks = [e for e in events if e["ph"] == "X"]
    assert all((e["pid"], e["tid"]) in named for e in tasks)
    assert all(e["tid"] < cfg.num_aic for e in tasks if e["args"].get("pool"))
    for lane in {(e["pid"], e["tid"]) for e in tasks}:
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in tasks if (e["pid"], e["tid"]) == lane)
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(spans, spans[1:])), lane  # µs rounded to ns


def test_with_mixed_queues_pool_units_go_on_any_claimer_lane_vector_ones_included():
    # Mixed queues without pipelines: every worker claims (MoeConfig.pool_claimers), so a unit may have run
    # on a vector-queue block; with all cube lanes busy, it must land on a free AIV lane, not overlap one.
    cfg = make_config("small", {"ep": 2, "mixed_queues": True, "claim_pool": True, "tokens": 96})
    assert cfg.pool_claimers == cfg.num_aic + cfg.num_aiv
    schedules = compile_schedules(cfg, ["bwd"], [0, 1])
    workers = cfg.num_aic + cfg.num_aiv
    stamps = {}
    for s in schedules:
        st = np.zeros((len(s.tasks), 2), np.uint64)
        clocks = [1000] * workers
        for q in range(workers):
            for t in s.queue_tasks(q).tolist():
                st[t] = (clocks[q], clocks[q] + 10)
                clocks[q] += 10
        for i, q in enumerate(range(workers, len(s.queues))):  # unit i on worker i mod workers
            lane = i % workers
            start = max(clocks) if i < workers else clocks[lane]  # the first wave starts together
            for t in s.queue_tasks(q).tolist():
                st[t] = (start, start + 10)
                start += 10
            clocks[lane] = start
        stamps[("bwd", s.rank)] = st
    events = trace_events(schedules, stamps)
    tasks = [e for e in events if e["ph"] == "X"]
    pool_lanes = {e["tid"] for e in tasks if e["args"].get("pool")}
    assert any(tid >= 1000 for tid in pool_lanes), pool_lanes  # some ran on vector-queue blocks' lanes
    assert UNPLACED_LANE not in pool_lanes
    for lane in {(e["pid"], e["tid"]) for e in tasks}:
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in tasks if (e["pid"], e["tid"]) == lane)
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(spans, spans[1:])), lane


def test_ready_is_the_last_producer_end_on_any_rank():
    cfg = make_config("small", {"ep": 2, "claim_pool": True})
    schedules = compile_schedules(cfg, ["fwd"], [0, 1])
    rng = np.random.default_rng(0)
    stamps = {}
    for s in schedules:  # made-up times: every task ran, in any order
        begin = rng.integers(1_000_000, 2_000_000, len(s.tasks)).astype(np.uint64)
        stamps[("fwd", s.rank)] = np.stack([begin, begin + rng.integers(10, 1000, len(s.tasks)).astype(np.uint64)], 1)
    origin = min(int(stamps[("fwd", s.rank)][:, 0].min()) for s in schedules)
    events = [e for e in trace_events(schedules, stamps) if e["ph"] == "X"]
    checked = 0
    for s in schedules:
        for e in (e for e in events if e["pid"] == s.rank):
            t = e["args"]["task"]
            waits = {int(v) for v in s.tasks[t]["dependent_event"] if v != NO_EVENT}
            ends = [int(stamps[("fwd", p.rank)][u, 1]) for p in schedules for u in range(len(p.tasks))
                    for ev, rk in zip(p.tasks[u]["trigger_event"], p.tasks[u]["trigger_rank"])
                    if ev != NO_EVENT and int(rk) == s.rank and int(ev) in waits]
            if not waits:
                assert "ready" not in e["args"], e
                continue
            assert e["args"]["ready"] == round((max(ends) - origin) / 1000.0, 3), (e, max(ends))
            checked += 1
    assert checked > 10
