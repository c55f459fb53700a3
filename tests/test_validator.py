"""The validator accepts compiled schedules and catches each kind of broken one, naming where."""
from __future__ import annotations

import pytest

from hpmoe.config import make_config
from hpmoe.errors import ScheduleError
from hpmoe.ssc_format import NO_EVENT, QueueType, TaskType
from hpmoe.validate import check, validate
from schedule_tools import compile_group, queues_of, set_queues

CFG = make_config("small", {"ep": 2})


@pytest.mark.parametrize("overrides", [{}, {"ep": 3}, {"ep": 5, "topk": 3}, {"ratr": False}, {"interleave": False},
                                       {"ep": 1}, {"num_aic": 1, "num_aiv": 1}, {"tile_m": 8, "token_tile": 24}])
@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_compiled_groups_are_valid(overrides, direction):
    cfg = make_config("small", overrides)
    assert validate(compile_group(cfg, direction)) == []


def _first(s, task_type, **fields):
    for i, t in enumerate(s.tasks):
        if int(t["task_type"]) == task_type and all(int(t[k]) == v for k, v in fields.items()):
            return i
    raise AssertionError(f"no {task_type.name} with {fields}")


def test_missing_trigger_is_caught():
    group = compile_group(CFG, "fwd")
    put = _first(group[0], TaskType.DISPATCH_PUT, peer=1)
    event = int(group[0].tasks[put]["trigger_event"][0])
    group[0].tasks[put]["trigger_event"][0] = NO_EVENT
    errors = validate(group)
    assert any(f"rank 1 event {event}: threshold 1 but 0 trigger(s)" in e for e in errors), errors
    assert any("without waiting for it" in e and "DISPATCH_PUT" in e for e in errors), errors


def test_wrong_threshold_is_caught():
    group = compile_group(CFG, "bwd")
    group[1].events[3]["threshold"] += 1
    errors = validate(group)
    assert any(e.startswith("rank 1 event 3: threshold") for e in errors), errors
    with pytest.raises(ScheduleError, match="rank 1 event 3"):
        check(group)


def test_cycle_across_ranks_is_caught():
    """Rank 0 runs its final reduce (needs rank 1's combine puts) before a put rank 1 is waiting for."""
    group = compile_group(CFG, "fwd")
    s = group[0]
    reduce_task = _first(s, TaskType.COMBINE_REDUCE)
    put = _first(s, TaskType.DISPATCH_PUT, peer=1)
    queues = [(qt, [t for t in tasks if t not in (reduce_task, put)]) for qt, tasks in queues_of(s)]
    vtq = next(i for i, (qt, _) in enumerate(queues) if qt == QueueType.VTQ)
    queues[vtq] = (QueueType.VTQ, [reduce_task, put] + queues[vtq][1])
    set_queues(s, queues)
    errors = validate(group)
    assert len(errors) == 1 and errors[0].startswith("deadlock"), errors
    assert "rank 0 VTQ worker 0 task" in errors[0] and "rank 1" in errors[0] and "event" in errors[0], errors[0]


def test_weight_gradient_ahead_of_its_chain_is_a_reported_cycle():
    """Row pipelines: a weight-gradient tile moved ahead of a chain on its own worker waits on that chain's
    SwiGLU gradient forever. The report is one cycle line (the walk once ended at a sink the cycle blocks)."""
    group = compile_group(make_config("small", {"ep": 3, "mixed_queues": True, "row_pipelines": True}), "bwd")
    s = group[0]
    queues = queues_of(s)
    def is_w1_grad(t):  # dW1 reads dH: it waits on every SwiGLU gradient tile
        return int(s.tasks[t]["task_type"]) == TaskType.GMM_WEIGHT_GRAD and int(s.tasks[t]["op_id"]) == 5
    q = next(i for i, (_, tasks) in enumerate(queues) if any(is_w1_grad(t) for t in tasks))
    qt, tasks = queues[q]
    wgrad = next(t for t in tasks if is_w1_grad(t))
    rest = [t for t in tasks if t != wgrad]
    first_chain = next(i for i, t in enumerate(rest) if int(s.tasks[t]["task_type"]) == TaskType.GMM_TRANS_B)
    queues[q] = (qt, rest[:first_chain] + [wgrad] + rest[first_chain:])
    set_queues(s, queues)
    errors = validate(group)
    assert len(errors) == 1 and errors[0].startswith("deadlock: dependency and queue-order cycle"), errors
    assert "\n" not in errors[0] and "SWIGLU_GRAD" in errors[0], errors[0]


def test_claim_pool_order_and_claimers_queues_are_checked():
    """Pool units are claimed in order by the claimers (MoeConfig.pool_claimers) after their own queue: a unit
    ahead of one it waits on, or a claimer's own task waiting on the pool, is a cycle; a vector task needs
    mixed queues."""
    cfg = make_config("small", {"ep": 2, "claim_pool": True, "mixed_queues": True, "row_pipelines": True})
    group = compile_group(cfg, "bwd")
    assert validate(group) == []
    s = group[0]
    workers = cfg.num_aic + cfg.num_aiv
    queues = queues_of(s)
    # A dW1 unit (it reads dH: waits on every chain's SwiGLU gradient) claimed before the chains.
    wgrad_q = next(i for i, (qt, tasks) in enumerate(queues) if i >= workers
                   and int(s.tasks[tasks[0]]["task_type"]) == TaskType.GMM_WEIGHT_GRAD
                   and int(s.tasks[tasks[0]]["op_id"]) == 5)
    set_queues(s, queues[:workers] + [queues[wgrad_q]] + [q for i, q in enumerate(queues[workers:], workers)
                                                          if i != wgrad_q])
    errors = validate(group)
    assert len(errors) == 1 and errors[0].startswith("deadlock") and "POOL" in errors[0], errors
    # A claimer's own queue ending with a reduce that waits on pooled combine puts.
    group = compile_group(cfg, "bwd")
    s = group[0]
    queues = queues_of(s)
    reduce_q = next(i for i, (qt, tasks) in enumerate(queues) if i >= workers
                    and int(s.tasks[tasks[0]]["task_type"]) == TaskType.BWD_COMBINE_REDUCE)
    queues[0] = (queues[0][0], queues[0][1] + queues[reduce_q][1])
    set_queues(s, [q for i, q in enumerate(queues) if i != reduce_q])
    errors = validate(group)
    assert len(errors) == 1 and errors[0].startswith("deadlock"), errors
    # The same in a vector-queue worker's own queue: a cycle where it claims (mixed queues without row
    # pipelines: MoeConfig.pool_claimers), not where it does not.
    for variant, claims in ((cfg, False), (cfg.replace(row_pipelines=False), True)):
        assert (variant.pool_claimers == workers) == claims
        group = compile_group(variant, "bwd")
        s = group[0]
        queues = queues_of(s)
        reduce_q = next(i for i, (qt, tasks) in enumerate(queues) if i >= workers
                        and int(s.tasks[tasks[0]]["task_type"]) == TaskType.BWD_COMBINE_REDUCE)
        vtq = variant.num_aic
        queues[vtq] = (queues[vtq][0], queues[vtq][1] + queues[reduce_q][1])
        set_queues(s, [q for i, q in enumerate(queues) if i != reduce_q])
        errors = validate(group)
        if claims:
            assert len(errors) == 1 and errors[0].startswith("deadlock"), errors
        else:
            assert errors == [], errors
    # A vector task in the pool without mixed queues.
    group = compile_group(make_config("small", {"ep": 2, "claim_pool": True}), "bwd")
    s = group[0]
    queues = queues_of(s)
    swiglu_grad = _first(s, TaskType.SWIGLU_GRAD)
    queues = [(qt, [t for t in tasks if t != swiglu_grad]) for qt, tasks in queues]
    set_queues(s, queues + [(QueueType.POOL, [swiglu_grad])])
    assert any("is a vector task" in e for e in validate(group)), validate(group)


def test_overlapping_unordered_writes_are_caught():
    group = compile_group(CFG, "fwd")
    s = group[0]
    gmm = [i for i, t in enumerate(s.tasks) if int(t["task_type"]) == TaskType.GMM and int(t["op_id"]) == 1]
    s.tasks[gmm[0]]["outputs"][0]["rows"] *= 2  # now also writes the next tile's rows
    errors = validate(group)
    assert any("write overlapping H on rank 0 with nothing ordering them" in e for e in errors), errors


def test_task_in_two_queues_and_missing_task_are_caught():
    group = compile_group(CFG, "fwd")
    queues = queues_of(group[0])
    moved = queues[0][1][0]
    queues[1][1].append(moved)  # CTQ worker 1 also runs CTQ worker 0's first task
    set_queues(group[0], queues)
    errors = validate(group)
    assert any(f"rank 0 task {moved}: appears in 2 queues" in e for e in errors), errors


def test_single_rank_checks_local_invariants_only():
    group = compile_group(CFG, "fwd")
    assert validate(group[:1]) == []
    group[0].events[0]["threshold"] = 0  # local triggers alone now exceed it
    assert any("threshold 0" in e for e in validate(group[:1]))
