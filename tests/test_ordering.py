"""Queue orders: operator order, rank-aware task reordering (RATR), cache-guided GMM interleaving, and the
deal to workers by expected work."""
from __future__ import annotations

import numpy as np
import pytest

from hpmoe.compiler import build_group_tasks, schedule_rank
from hpmoe.config import make_config
from hpmoe.errors import ConfigError
from hpmoe.expected_work import expected_cost
from hpmoe.ordering import queue_order
from hpmoe.ssc_format import QueueType, TaskType
from hpmoe.validate import validate
from schedule_tools import compile_group

EP = 4
CFG = make_config("small", {"ep": EP})


def _orders(cfg, direction: str, queue_type: QueueType):
    group = build_group_tasks(cfg, direction)
    return {r: queue_order(cfg, group.rank_tasks(r), queue_type) for r in range(cfg.ep)}


def _put_destinations(order) -> list[int]:
    peers = [t.peer for t in order if t.task_type == TaskType.DISPATCH_PUT]
    return list(dict.fromkeys(peers))  # destinations in the order each is first sent to


def test_ratr_walks_a_ring_from_the_own_rank():
    orders = _orders(CFG, "fwd", QueueType.VTQ)
    for rank, order in orders.items():
        assert _put_destinations(order) == [(rank + i) % EP for i in range(EP)], f"rank {rank}"
    # At every step of the walk, each rank is the destination of exactly one source: no hotspot.
    for step in range(EP):
        assert sorted(_put_destinations(o)[step] for o in orders.values()) == list(range(EP)), f"step {step}"


def test_without_ratr_every_source_hits_the_same_destination_first():
    orders = _orders(CFG.replace(ratr=False), "fwd", QueueType.VTQ)
    assert {tuple(_put_destinations(o)) for o in orders.values()} == {tuple(range(EP))}


def test_ratr_row_tiles_follow_slot_arrival_order():
    for rank, order in _orders(CFG, "fwd", QueueType.CTQ).items():
        arrival = list(dict.fromkeys(t.peer for t in order if t.op_name == "GMM1"))
        assert arrival == [(rank - i) % EP for i in range(EP)], f"rank {rank}: {arrival}"


def test_interleaving_puts_each_weight_grad_next_to_its_branch():
    names = {"GMM_w2_grad": "GMM_act_grad", "GMM_w1_grad": "GMM_gate_grad"}
    for rank, order in _orders(CFG, "bwd", QueueType.CTQ).items():
        ops = [t.op_name for t in order]
        for wgrad, partner in names.items():
            last_partner = len(ops) - 1 - ops[::-1].index(partner)
            positions = [i for i, op in enumerate(ops) if op == wgrad]
            # Each weight-grad tile follows a row tile of its branch (or another weight-grad tile of it) ...
            assert all(ops[p - 1] in (partner, wgrad) for p in positions), f"rank {rank} {wgrad}: {ops}"
            # ... and the first one runs before that branch's last row tile.
            assert positions[0] < last_partner, f"rank {rank} {wgrad}: only after the branch: {ops}"


def test_without_interleaving_ctq_is_operator_order():
    for rank, order in _orders(CFG.replace(interleave=False), "bwd", QueueType.CTQ).items():
        ops = [t.op_id for t in order]
        assert ops == sorted(ops), f"rank {rank}: {ops}"


@pytest.mark.parametrize("change", [{"ratr": False}, {"interleave": False}])
def test_reordering_changes_queues_only(change):
    base = compile_group(CFG, "bwd")
    other = compile_group(CFG.replace(**change), "bwd")
    for a, b in zip(base, other):
        assert np.array_equal(a.tasks, b.tasks) and np.array_equal(a.events, b.events)
        assert sorted(a.entries.tolist()) == sorted(b.entries.tolist())


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_each_worker_queue_is_a_subsequence_of_the_order_and_work_is_balanced(direction):
    cfg = make_config("deepseek-v3", {"ep": 4, "tokens": 1024, "num_aic": 5, "num_aiv": 6})
    group = build_group_tasks(cfg, direction)
    tasks = group.rank_tasks(2)
    s = schedule_rank(group, 2)
    for qtype, workers in ((QueueType.CTQ, cfg.num_aic), (QueueType.VTQ, cfg.num_aiv)):
        order = queue_order(cfg, tasks, qtype)
        position = {id(t): i for i, t in enumerate(order)}
        queues = [[tasks[i] for i in s.queue_tasks(q).tolist()] for q in range(len(s.queues))
                  if int(s.queues[q]["queue_type"]) == qtype]
        assert len(queues) == workers and sum(map(len, queues)) == len(order)
        for q in queues:
            assert [position[id(t)] for t in q] == sorted(position[id(t)] for t in q), f"{qtype.name} reordered"
        loads = [sum(expected_cost(cfg, t) for t in q) for q in queues]
        biggest = max(expected_cost(cfg, t) for t in order)
        assert max(loads) - min(loads) <= biggest, f"{qtype.name}: loads {loads}"


def test_expected_work_sees_empty_tiles():
    cfg = make_config("deepseek-v3", {"ep": 16, "tokens": 4096})  # 10 chunks per slot, the last 2 empty
    group = build_group_tasks(cfg, "fwd", ranks=[0])
    gmm1 = [t for t in group.rank_tasks(0) if t.op_name == "GMM1"]
    costs = {t.chunk: expected_cost(cfg, t) for t in gmm1 if t.peer == 0}
    assert costs[cfg.chunks_per_src - 1] < costs[0] / 100, costs


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_mixed_queues_deal_dispatch_and_final_reductions_over_every_worker(direction):
    tail_type = TaskType.COMBINE_REDUCE if direction == "fwd" else TaskType.BWD_COMBINE_REDUCE
    put_type = TaskType.DISPATCH_PUT if direction == "fwd" else TaskType.BWD_DISPATCH_PUT
    setup = (TaskType.ENTRY_SIGNAL, TaskType.COUNT_PUT)
    cfg = CFG.replace(mixed_queues=True, tokens=96)  # 6 token tiles over 2 AIC + 4 AIV: one each
    s = schedule_rank(build_group_tasks(cfg, direction), 0)
    queues = [s.tasks["task_type"][s.queue_tasks(q)].tolist() for q in range(len(s.queues))]
    workers = list(range(cfg.num_aic + cfg.num_aiv))
    assert [q for q, types in enumerate(queues) if tail_type in types] == workers  # cube queues first
    assert [q for q, types in enumerate(queues) if put_type in types] == workers
    for types in queues:
        # Tail: last in every queue, so nothing a worker runs earlier can wait on it.
        assert types[-1] == tail_type and types.count(tail_type) == 1
        # Head: the puts right after the set-up signals (every put waits on them), before anything else.
        body = [t for t in types if t not in setup]
        n_puts = types.count(put_type)
        assert body[:n_puts] == [put_type] * n_puts, types
        assert all(types.index(t) < types.index(put_type) for t in setup if t in types), types
    plain = schedule_rank(build_group_tasks(cfg.replace(mixed_queues=False), direction), 0)
    for q in range(cfg.num_aic):
        kinds = set(plain.tasks["task_type"][plain.queue_tasks(q)].tolist())
        assert not kinds & {tail_type, put_type}


def test_router_weight_gradient_runs_before_the_backward_combine():
    """It reads only dy and saved rows: it fills the wait for the activation-gradient tiles, not the tail."""
    for order in _orders(CFG, "bwd", QueueType.VTQ).values():
        names = [t.op_name for t in order]
        first_combine = names.index("BwdCombine")
        assert max(i for i, n in enumerate(names) if n == "TopkWeightGrad") < first_combine
        assert min(i for i, n in enumerate(names) if n == "TopkWeightGrad") > \
            max(i for i, n in enumerate(names) if n == "SwiGLU_grad")


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_row_pipelines_keep_each_row_tile_on_one_worker(direction):
    cfg = CFG.replace(mixed_queues=True, row_pipelines=True, tokens=96)
    s = schedule_rank(build_group_tasks(cfg, direction), 0)
    worker_of = {}
    for q in range(len(s.queues)):
        for task in s.queue_tasks(q).tolist():
            worker_of[task] = q
    types = s.tasks["task_type"]
    chain = {int(t) for t in (TaskType.GMM, TaskType.SWIGLU, TaskType.GMM_TRANS_B, TaskType.SWIGLU_GRAD,
                              TaskType.COMBINE_PUT)}
    by_row: dict[int, set[int]] = {}
    for i in range(len(types)):
        if int(types[i]) in chain:
            assert worker_of[i] < cfg.num_aic, "chains go to cube-queue workers"
            by_row.setdefault(int(s.tasks["inputs"][i][0]["row_offset"]), set()).add(worker_of[i])
    assert by_row and all(len(w) == 1 for w in by_row.values()), by_row
    topk = [worker_of[i] for i in range(len(types)) if int(types[i]) == TaskType.TOPK_WEIGHT_GRAD]
    assert all(q >= cfg.num_aic for q in topk), "router-weight gradient tiles go to the vector-queue workers"
    assert (direction == "bwd") == bool(topk)
    for q in range(cfg.num_aic):  # weight gradients after every chain of their worker (they wait on all)
        kinds = [int(t) for t in types[s.queue_tasks(q)]]
        if TaskType.GMM_WEIGHT_GRAD in kinds:
            first = kinds.index(TaskType.GMM_WEIGHT_GRAD)
            assert not chain & set(kinds[first:]), kinds


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_mixed_queues_pool_the_second_gmms_and_puts_then_gradients_then_reductions(direction):
    # Mixed queues with a claim pool (no pipelines): every worker claims after its own queue. The pool holds
    # each row tile's second GMM and its combine puts (a put after its rows' GMMs), then the weight-gradient
    # tiles, then the final reductions, which in a claimer's own queue would hold it until the last put.
    cfg = CFG.replace(mixed_queues=True, claim_pool=True, tokens=96)
    assert cfg.pool_claimers == cfg.num_aic + cfg.num_aiv
    s = schedule_rank(build_group_tasks(cfg, direction), 0)
    workers = cfg.num_aic + cfg.num_aiv
    reduce, gmm = (TaskType.COMBINE_REDUCE, TaskType.GMM) if direction == "fwd" else \
        (TaskType.BWD_COMBINE_REDUCE, TaskType.GMM_TRANS_B)
    queues = [s.tasks["task_type"][s.queue_tasks(q)].tolist() for q in range(workers)]
    assert not any(reduce in types or TaskType.COMBINE_PUT in types for types in queues)
    units = [s.queue_tasks(q).tolist() for q in range(workers, len(s.queues))]
    assert all(len(u) == 1 for u in units)
    kinds = [int(s.tasks["task_type"][u[0]]) for u in units]
    phase = [0 if k in (gmm, TaskType.COMBINE_PUT) else 1 if k == TaskType.GMM_WEIGHT_GRAD else 2 if k == reduce
             else -1 for k in kinds]
    assert phase == sorted(phase) and set(phase) == ({0, 1, 2} if direction == "bwd" else {0, 2}), kinds
    assert {gmm, TaskType.COMBINE_PUT} <= set(kinds)
    # Each put after every GMM of its rows (a second GMM writes the rows the put reads).
    for i, (task,) in enumerate(units):
        if kinds[i] != TaskType.COMBINE_PUT:
            continue
        put = s.tasks[task]["inputs"][0]
        for j in range(i + 1, len(units)):
            out = s.tasks[units[j][0]]["outputs"][0]
            if kinds[j] == gmm and out["slot"] == put["slot"]:
                assert out["row_offset"] >= put["row_offset"] + put["rows"] or \
                    out["row_offset"] + out["rows"] <= put["row_offset"], (i, j)
    assert validate(compile_group(cfg, direction), group=True) == []


def test_row_pipelines_need_mixed_queues():
    with pytest.raises(ConfigError, match="row_pipelines needs mixed_queues"):
        CFG.replace(row_pipelines=True)


@pytest.mark.parametrize("ep", [1, 2, 3, 5])
@pytest.mark.parametrize("overrides", [{}, {"topk": 1}, {"tokens": 96, "token_tile": 32}])
def test_row_pipelines_validate_for_every_group(ep, overrides):
    cfg = make_config("small", {"ep": ep, "mixed_queues": True, "row_pipelines": True, **overrides})
    for direction in ("fwd", "bwd"):
        assert validate(compile_group(cfg, direction), group=True) == []


def test_claim_pool_alone_holds_every_weight_gradient_tile_and_only_those():
    cfg = CFG.replace(claim_pool=True)
    for direction in ("fwd", "bwd"):
        s = schedule_rank(build_group_tasks(cfg, direction), 0)
        workers = cfg.num_aic + cfg.num_aiv
        assert all(int(q["queue_type"]) == QueueType.POOL for q in s.queues[workers:])
        pool = [t for q in range(workers, len(s.queues)) for t in s.queue_tasks(q).tolist()]
        wgrad = np.nonzero(s.tasks["task_type"] == int(TaskType.GMM_WEIGHT_GRAD))[0].tolist()
        assert sorted(pool) == wgrad and len(pool) == len(s.queues) - workers  # one tile a unit; none in fwd
        outs = s.tasks["outputs"][pool, 0]
        areas = (outs["rows"].astype(np.int64) * outs["cols"]).tolist()
        assert areas == sorted(areas, reverse=True)  # the largest tiles first (same K: the expert's rows)
        assert cfg.pool_claimers == cfg.num_aic  # without mixed queues only the cube-queue workers claim
        assert validate(compile_group(cfg, direction), group=True) == []


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_claim_pool_with_pipelines_holds_half_chains_then_gradients_then_reductions(direction):
    cfg = CFG.replace(claim_pool=True, mixed_queues=True, row_pipelines=True)
    s = schedule_rank(build_group_tasks(cfg, direction), 0)
    workers = cfg.num_aic + cfg.num_aiv
    units = [[int(s.tasks["task_type"][t]) for t in s.queue_tasks(q)] for q in range(workers, len(s.queues))]
    chain = [int(t) for t in (TaskType.GMM, TaskType.SWIGLU, TaskType.GMM) if direction == "fwd"] or \
        [int(t) for t in (TaskType.GMM_TRANS_B, TaskType.SWIGLU_GRAD, TaskType.GMM_TRANS_B)]
    kinds = ["first half" if u == chain[:2] else "second half" if u == [chain[2], TaskType.COMBINE_PUT] else
             "wgrad" if u == [TaskType.GMM_WEIGHT_GRAD] else
             "reduce" if len(u) == 1 and u[0] in (TaskType.COMBINE_REDUCE, TaskType.BWD_COMBINE_REDUCE) else str(u)
             for u in units]
    order = [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k]
    want = ["first half", "second half", "reduce"] if direction == "fwd" else \
        ["first half", "second half", "wgrad", "reduce"]
    assert order == want, order
    claimers_own = {int(t) for q in range(cfg.num_aic) for t in s.tasks["task_type"][s.queue_tasks(q)]}
    assert not claimers_own & set(chain + [int(TaskType.COMBINE_REDUCE), int(TaskType.BWD_COMBINE_REDUCE)])
    assert validate(compile_group(cfg, direction), group=True) == []


def test_with_a_claim_pool_remote_puts_go_to_the_last_quarter_of_the_workers():
    """The link-bound puts to other ranks on a few workers (the vector ones first); local puts on all, first."""
    cfg = make_config("small", {"ep": 4, "num_aic": 10, "num_aiv": 2, "mixed_queues": True,
                                "row_pipelines": True, "claim_pool": True})
    s = schedule_rank(build_group_tasks(cfg, "fwd"), 1)
    workers = cfg.num_aic + cfg.num_aiv
    senders = set(range(workers - max(cfg.num_aiv, -(-workers // 4)), workers))
    for q in range(workers):
        puts = [t for t in s.queue_tasks(q).tolist() if int(s.tasks["task_type"][t]) == TaskType.DISPATCH_PUT]
        peers = [int(s.tasks["peer"][t]) for t in puts]
        if q not in senders:
            assert set(peers) <= {1}, (q, peers)
        assert peers == sorted(peers, key=lambda p: p != 1), (q, peers)  # local ones first
    remote = {q for q in range(workers) for t in s.queue_tasks(q).tolist()
              if int(s.tasks["task_type"][t]) == TaskType.DISPATCH_PUT and int(s.tasks["peer"][t]) != 1}
    assert remote and remote <= senders
    assert validate(compile_group(cfg, "fwd"), group=True) == []
