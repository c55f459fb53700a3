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


@pytest.mark.parametrize("routing", ROUTINGS)
@pytest.mark.parametrize("ep,topk,experts", [(1, 2, 4), (3, 3, 4), (4, 4, 2), (2, 1, 8)])
def test_plan_equals_numpy_reference(routing, ep, topk, experts):
    cfg = make_config("small", {"ep": ep, "topk": topk, "experts_per_rank": experts, "tokens": 77})
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
