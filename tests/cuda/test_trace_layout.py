"""The GPU trace writer on made-up stamps (no GPU needed): every stamped task appears once, on the lane of the
worker its record names (claimed pool units too); records that do not fit the schedule are refused; each task
carries when the tasks triggering its events had all ended."""
from __future__ import annotations

import numpy as np
import pytest

from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config
from hpmoe.cuda.trace import TRACE_WORDS, trace_events
from hpmoe.ssc_format import NO_EVENT, QueueType


def _made_up_stamps(s, cfg, rng) -> np.ndarray:
    """Each worker's queue one task after another, then each pool unit on a random claimer: [start, end, worker]."""
    workers = cfg.num_aic + cfg.num_aiv
    st = np.zeros((len(s.tasks), TRACE_WORDS), np.uint64)
    clocks = [1000] * workers
    for q in range(workers):
        for t in s.queue_tasks(q).tolist():
            st[t] = (clocks[q], clocks[q] + 10, q)
            clocks[q] += 10
    for q in range(workers, len(s.queues)):
        claimer = int(rng.integers(0, cfg.pool_claimers))
        for t in s.queue_tasks(q).tolist():
            st[t] = (clocks[claimer], clocks[claimer] + 10, claimer)
            clocks[claimer] += 10
    return st


@pytest.mark.parametrize("overrides", [{"claim_pool": True}, {"mixed_queues": True, "claim_pool": True, "tokens": 96},
                                       {"mixed_queues": True, "row_pipelines": True, "claim_pool": True}])
def test_every_task_once_on_the_lane_of_the_worker_that_ran_it(overrides):
    cfg = make_config("small", {"ep": 2, **overrides})
    schedules = compile_schedules(cfg, ["bwd"], [0, 1])
    rng = np.random.default_rng(0)
    stamps = {("bwd", s.rank): _made_up_stamps(s, cfg, rng) for s in schedules}
    events = trace_events(schedules, stamps)
    named = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert len(named) == 2 * (cfg.num_aic + cfg.num_aiv)
    tasks = [e for e in events if e["ph"] == "X"]
    for s in schedules:
        mine = [e for e in tasks if e["pid"] == s.rank]
        assert sorted(e["args"]["task"] for e in mine) == list(range(len(s.tasks)))
        pool = {t for q in range(cfg.num_aic + cfg.num_aiv, len(s.queues)) for t in s.queue_tasks(q).tolist()}
        assert int(s.queues[-1]["queue_type"]) == QueueType.POOL and pool
        for e in mine:
            worker = int(stamps[("bwd", s.rank)][e["args"]["task"], 2])
            role, index = ("AIC", worker) if worker < cfg.num_aic else ("AIV", worker - cfg.num_aic)
            assert named[(e["pid"], e["tid"])] == f"{role} {index}", e
            assert bool(e["args"].get("pool")) == (e["args"]["task"] in pool), e
    for lane in {(e["pid"], e["tid"]) for e in tasks}:  # the made-up workers never overlap themselves
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in tasks if (e["pid"], e["tid"]) == lane)
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(spans, spans[1:])), lane


def test_a_record_naming_a_worker_the_schedule_lacks_is_refused_with_its_task():
    cfg = make_config("small", {"ep": 1, "claim_pool": True})
    (s,) = compile_schedules(cfg, ["fwd"], [0])
    st = _made_up_stamps(s, cfg, np.random.default_rng(1))
    st[5, 2] = cfg.num_aic + cfg.num_aiv
    with pytest.raises(ValueError, match=f"task 5 names worker {cfg.num_aic + cfg.num_aiv}, the schedule has"):
        trace_events([s], {("fwd", 0): st})


def test_stamps_without_the_worker_column_are_refused():
    cfg = make_config("small", {"ep": 1})
    (s,) = compile_schedules(cfg, ["fwd"], [0])
    with pytest.raises(ValueError, match=r"stamps of shape \(\d+, 2\), the schedule needs"):
        trace_events([s], {("fwd", 0): np.ones((len(s.tasks), 2), np.uint64)})


def test_ready_is_the_last_producer_end_on_any_rank():
    cfg = make_config("small", {"ep": 2, "claim_pool": True})
    schedules = compile_schedules(cfg, ["fwd"], [0, 1])
    rng = np.random.default_rng(0)
    stamps = {}
    for s in schedules:  # made-up times: every task ran, in any order
        begin = rng.integers(1_000_000, 2_000_000, len(s.tasks)).astype(np.uint64)
        worker = rng.integers(0, cfg.num_aic + cfg.num_aiv, len(s.tasks)).astype(np.uint64)
        stamps[("fwd", s.rank)] = np.stack([begin, begin + rng.integers(10, 1000, len(s.tasks)).astype(np.uint64),
                                            worker], 1)
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
