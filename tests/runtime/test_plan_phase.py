"""The shared routing plan phase (op_kernel/runtime/routing_plan.h, the code the CPU twin runs and the CUDA
kernels must equal) against the independent numpy plan (routing.plan_rank: lexsort by destination, local
expert, t*k + j): bit-for-bit equal plans, the bucket it needs, and one-line refusals."""
from __future__ import annotations

import numpy as np
import pytest

from hpmoe.config import make_config
from hpmoe.errors import RoutingError
from hpmoe.runtime.plan_phase import build_plan, plan_or_raise
from hpmoe.runtime.routing import ROUTINGS, bucket_for, make_routing, plan_rank, rows_needed


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("routing", ROUTINGS)
@pytest.mark.parametrize("ep,topk,experts", [(1, 2, 4), (3, 3, 4), (4, 4, 2), (2, 1, 8)])
def test_plan_equals_numpy_reference(routing, ep, topk, experts, aligned):
    cfg = make_config("small", {"ep": ep, "topk": topk, "experts_per_rank": experts, "tokens": 77,
                                "expert_aligned": aligned})
    if routing == "empty" and (cfg.num_experts + 1) // 2 < topk:
        pytest.skip("routing 'empty' needs topk < number of experts / 2")
    ids, _ = make_routing(cfg, routing, seed=11)
    cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, ids))
    for r in range(ep):
        ref = plan_rank(cfg, ids[r])
        plan, need = build_plan(cfg, ids[r])
        assert need == int(rows_needed(cfg, ids)[r].max())
        np.testing.assert_array_equal(plan.send_rows, ref.send_rows)
        np.testing.assert_array_equal(plan.send_counts, ref.send_counts)
        np.testing.assert_array_equal(plan.token_rows, ref.token_rows)


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("tokens", [(0, 77), (0, 26), (26, 52), (52, 77), (30, 31), (40, 40)])
def test_plan_of_a_token_range_equals_numpy_reference_and_routes_only_its_tokens(tokens, aligned):
    """A pass of the speculative bucket (docs/design.md): the plan of tokens [begin, end) only."""
    cfg = make_config("small", {"ep": 3, "topk": 3, "experts_per_rank": 4, "tokens": 77, "expert_aligned": aligned})
    ids, _ = make_routing(cfg, "skewed", seed=5)
    cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, ids))
    begin, end = tokens
    for r in range(cfg.ep):
        ref = plan_rank(cfg, ids[r], tokens)
        plan, need = build_plan(cfg, ids[r], tokens)
        np.testing.assert_array_equal(plan.send_rows, ref.send_rows)
        np.testing.assert_array_equal(plan.send_counts, ref.send_counts)
        np.testing.assert_array_equal(plan.token_rows, ref.token_rows)
        assert (plan.token_rows[:begin] == -1).all() and (plan.token_rows[end:] == -1).all()
        routed = plan.send_rows[plan.send_rows >= 0]
        assert sorted(routed.tolist()) == list(range(begin * cfg.topk, end * cfg.topk))  # each entry once
        whole = ids[r].reshape(-1)[begin * cfg.topk:end * cfg.topk]
        assert plan.send_counts.sum() == len(whole) and need <= cfg.recv_rows_per_src


@pytest.mark.parametrize("routing", ROUTINGS)
def test_aligned_plan_puts_one_expert_in_each_row_tile(routing):
    """The layout itself, checked from the ids (not from another plan): with expert_aligned, each local
    expert's rows in a slot are one run in ascending t*k + j starting on a tile_m boundary, in expert order,
    with only pads (-1) between and after the runs."""
    cfg = make_config("small", {"ep": 2, "topk": 3, "experts_per_rank": 5, "tokens": 77, "expert_aligned": True})
    if routing == "empty" and (cfg.num_experts + 1) // 2 < cfg.topk:
        pytest.skip("routing 'empty' needs topk < number of experts / 2")
    ids, _ = make_routing(cfg, routing, seed=5)
    cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, ids))
    m, E = cfg.tile_m, cfg.experts_per_rank
    for r in range(cfg.ep):
        plan = plan_or_raise(cfg, ids[r])
        flat = ids[r].reshape(-1)
        for d in range(cfg.ep):
            row, expected = 0, np.full(cfg.recv_rows_per_src, -1)
            for e in range(E):
                mine = np.flatnonzero(flat == d * E + e)
                assert plan.send_counts[d, e] == len(mine)
                expected[row:row + len(mine)] = mine
                row += -(-len(mine) // m) * m
            np.testing.assert_array_equal(plan.send_rows[d], expected)
            assert row <= cfg.recv_rows_per_src and row == rows_needed(cfg, ids)[r, d]
        rows = plan.token_rows.reshape(-1)
        np.testing.assert_array_equal(plan.send_rows.reshape(-1)[rows], np.arange(flat.size))


def test_plan_refuses_overflow_and_bad_ids():
    cfg = make_config("small", {"ep": 2, "topk": 2})
    ids, _ = make_routing(cfg, "skewed", seed=3)
    small = cfg.replace(recv_rows_per_src=cfg.tile_m)
    need = int(rows_needed(cfg, ids)[0].max())
    assert need > small.recv_rows_per_src  # the test's premise: this routing overflows one tile
    with pytest.raises(RoutingError, match=f"sends {need} rows to one rank; the SSC bucket holds C={cfg.tile_m}"):
        plan_or_raise(small, ids[0])
    bad = ids[0].copy()
    bad[5, 1] = cfg.num_experts
    with pytest.raises(RoutingError, match=rf"topk_ids\[5, 1\] = {cfg.num_experts} is outside"):
        build_plan(cfg, bad)
