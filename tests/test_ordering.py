"""Queue orders: operator order, rank-aware task reordering (RATR) and cache-guided GMM interleaving."""
from __future__ import annotations

import numpy as np
import pytest

from hpmoe.config import make_config
from hpmoe.ssc_format import QueueType, TaskType
from schedule_tools import compile_group, global_order

EP = 4
CFG = make_config("small", {"ep": EP})


def _put_destinations(s, task_type=TaskType.DISPATCH_PUT) -> list[int]:
    order = global_order(s, QueueType.VTQ)
    peers = [int(s.tasks[i]["peer"]) for i in order if int(s.tasks[i]["task_type"]) == task_type]
    return list(dict.fromkeys(peers))  # destinations in the order each is first sent to


def test_ratr_walks_a_ring_from_the_own_rank():
    group = compile_group(CFG, "fwd")
    for s in group:
        assert _put_destinations(s) == [(s.rank + i) % EP for i in range(EP)], f"rank {s.rank}"
    # At every step of the walk, each rank is the destination of exactly one source: no hotspot.
    for step in range(EP):
        assert sorted(_put_destinations(s)[step] for s in group) == list(range(EP)), f"step {step}"


def test_without_ratr_every_source_hits_the_same_destination_first():
    group = compile_group(CFG.replace(ratr=False), "fwd")
    assert {tuple(_put_destinations(s)) for s in group} == {tuple(range(EP))}


def test_ratr_row_tiles_follow_slot_arrival_order():
    for s in compile_group(CFG, "fwd"):
        order = global_order(s, QueueType.CTQ)
        gmm1_slots = [int(s.tasks[i]["peer"]) for i in order if int(s.tasks[i]["op_id"]) == 1]
        arrival = list(dict.fromkeys(gmm1_slots))
        assert arrival == [(s.rank - i) % EP for i in range(EP)], f"rank {s.rank}: {arrival}"


def _ops_in_ctq(s) -> list[int]:
    return [int(s.tasks[i]["op_id"]) for i in global_order(s, QueueType.CTQ)]


def test_interleaving_puts_each_weight_grad_next_to_its_branch():
    names = {2: "w2_grad after act_grad", 5: "w1_grad after gate_grad"}
    for s in compile_group(CFG, "bwd"):
        ops = _ops_in_ctq(s)
        for wgrad, partner in ((2, 1), (5, 4)):
            last_partner = len(ops) - 1 - ops[::-1].index(partner)
            positions = [i for i, op in enumerate(ops) if op == wgrad]
            # Each weight-grad tile follows a row tile of its branch (or another weight-grad tile of it) ...
            assert all(ops[p - 1] in (partner, wgrad) for p in positions), f"rank {s.rank} {names[wgrad]}: {ops}"
            # ... and the first one runs before that branch's last row tile.
            assert positions[0] < last_partner, f"rank {s.rank} {names[wgrad]}: only after the branch: {ops}"


def test_without_interleaving_ctq_is_operator_order():
    for s in compile_group(CFG.replace(interleave=False), "bwd"):
        ops = _ops_in_ctq(s)
        assert ops == sorted(ops), f"rank {s.rank}: {ops}"


@pytest.mark.parametrize("change", [{"ratr": False}, {"interleave": False}])
def test_reordering_changes_queues_only(change):
    base = compile_group(CFG, "bwd")
    other = compile_group(CFG.replace(**change), "bwd")
    for a, b in zip(base, other):
        assert np.array_equal(a.tasks, b.tasks) and np.array_equal(a.events, b.events)
        assert sorted(a.entries.tolist()) == sorted(b.entries.tolist())


def test_workers_get_round_robin_shares():
    s = compile_group(CFG.replace(num_aic=3, num_aiv=5), "fwd")[0]
    for qtype, workers in ((QueueType.CTQ, 3), (QueueType.VTQ, 5)):
        sizes = [int(q["count"]) for q in s.queues if int(q["queue_type"]) == qtype]
        assert len(sizes) == workers and max(sizes) - min(sizes) <= 1
