"""The discrete-event engine obeys the runtime contract: events, queue order, deadlock reporting."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from hpmoe.sim.engine import SimDeadlock
from hpmoe.sim.fused import simulate_direction
from hpmoe.sim.routing import route_counts
from hpmoe.sim.workload import build_workload

from sim_helpers import group


def producers_of(wl):
    """event id -> tasks that trigger it."""
    prod = {}
    for t, trig in enumerate(wl.triggers.tolist()):
        for e in trig:
            if e >= 0:
                prod.setdefault(e, []).append(t)
    return prod


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
@pytest.mark.parametrize("routing", ["balanced", "zipf:1.2:3"])
def test_no_task_starts_before_its_events_reach_threshold(mid_cfg, mid_schedules, hw, direction, routing):
    cfg = mid_cfg.replace(capacity_factor=2.0, recv_rows_per_src=0) if routing != "balanced" else mid_cfg
    sched = mid_schedules if routing == "balanced" else None
    if sched is None:
        from hpmoe.compiler import compile_schedules
        sched = compile_schedules(cfg, [direction], list(range(cfg.ep)))
    counts = route_counts(cfg, routing)
    res = simulate_direction(group(sched, direction), counts, hw)
    wl = res.workload
    prod = producers_of(wl)
    assert all(len(prod[e]) == wl.thresholds[e] for e in prod), "threshold != number of triggers"
    for t, waits in enumerate(wl.waits.tolist()):
        for e in waits:
            if e >= 0:
                ready = max(res.end[p] for p in prod[e])
                assert res.start[t] >= ready - 1e-9, (f"{direction} task {t} starts at {res.start[t]} before event "
                                                      f"{e} is complete at {ready}")


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_workers_run_their_queue_in_order_without_overlap(mid_schedules, mid_cfg, hw, direction):
    res = simulate_direction(group(mid_schedules, direction), route_counts(mid_cfg), hw)
    for w, (_, _, _, queue) in enumerate(res.workload.workers):
        s, e = res.start[queue], res.end[queue]
        assert (res.worker[queue] == w).all()
        assert (e >= s).all()
        assert (s[1:] >= e[:-1] - 1e-9).all(), f"worker {w} overlaps or reorders its queue"


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_rank_makespan_is_at_least_its_critical_path(mid_schedules, mid_cfg, hw, direction):
    res = simulate_direction(group(mid_schedules, direction), route_counts(mid_cfg), hw)
    wl = res.workload
    prod = producers_of(wl)
    dur = res.end - res.start
    order = np.argsort(res.start, kind="stable")        # a topological order of the dependency edges
    finish = np.zeros(wl.num_tasks)
    for t in order.tolist():
        ready = max([finish[p] for e in wl.waits[t] if e >= 0 for p in prod[e]], default=res.launch_us)
        finish[t] = ready + dur[t]
    for r in range(wl.ep):
        cp = finish[wl.rank == r].max()
        assert res.rank_latency_us[r] >= cp - 1e-6, f"rank {r}: makespan {res.rank_latency_us[r]} < path {cp}"
        assert cp > res.launch_us
    assert res.latency_us >= res.aic_bound_us() - 1e-6


def test_deadlocking_schedule_is_reported_not_hung(mid_schedules, mid_cfg, hw):
    broken = [copy.deepcopy(s) for s in group(mid_schedules, "fwd")]
    broken[2].events["threshold"][5] += 1              # one trigger short: its waiters never run
    with pytest.raises(SimDeadlock, match=r"deadlock: \d+ worker\(s\) blocked forever; rank 2 event 5 stays at \d+/\d+ with no producer left"):
        simulate_direction(broken, route_counts(mid_cfg), hw)


def test_queue_order_cycle_is_reported(mid_cfg, hw):
    """One AIC worker; a GMM2 tile moved to the front of its queue waits on GMM1 tiles queued behind it."""
    from hpmoe.compiler import compile_schedules
    cfg = mid_cfg.replace(num_aic=1)
    broken = compile_schedules(cfg, ["fwd"], list(range(cfg.ep)))
    s = broken[1]
    (ctq,) = [i for i, q in enumerate(s.queues) if q["queue_type"] == 0]
    q = s.queues[ctq]
    entries = s.entries[q["first_entry"]:q["first_entry"] + q["count"]]
    gmm2 = [i for i, t in enumerate(entries) if s.tasks[t]["op_id"] == 3]
    moved = entries[gmm2[0]]
    entries[1:gmm2[0] + 1] = entries[0:gmm2[0]].copy()
    entries[0] = moved
    with pytest.raises(SimDeadlock, match=r"rank 1 AIC worker 0 at GMM \(task \d+\) waits on rank 1 event"):
        simulate_direction(broken, route_counts(cfg), hw)


def test_same_inputs_same_outputs(mid_schedules, mid_cfg, hw):
    counts = route_counts(mid_cfg)
    a = simulate_direction(group(mid_schedules, "bwd"), counts, hw)
    b = simulate_direction(group(mid_schedules, "bwd"), counts, hw)
    assert np.array_equal(a.start, b.start) and np.array_equal(a.end, b.end)
    assert np.array_equal(a.l2_hit_rate, b.l2_hit_rate)


def test_workload_counts_every_task_once(mid_schedules, mid_cfg, hw):
    wl = build_workload(group(mid_schedules, "fwd"), route_counts(mid_cfg), hw)
    queued = np.sort(np.concatenate([w[3] for w in wl.workers]))
    assert np.array_equal(queued, np.arange(wl.num_tasks))
