"""Routing plan invariants (docs/design.md) and the bucket check, independent of the runtime."""
from __future__ import annotations

import numpy as np
import pytest

from hpmoe.config import make_config
from hpmoe.errors import RoutingError
from hpmoe.runtime.routing import ROUTINGS, bucket_for, check_routing, make_routing, plan_rank, rows_needed


@pytest.mark.parametrize("routing", ROUTINGS)
def test_plan_invariants(routing):
    cfg = make_config("small", {"ep": 3, "topk": 3})
    ids, weights = make_routing(cfg, routing, seed=5)
    cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, ids))
    check_routing(cfg, ids, weights)
    E, C, k = cfg.experts_per_rank, cfg.recv_rows_per_src, cfg.topk
    for r in range(cfg.ep):
        plan = plan_rank(cfg, ids[r])
        for d in range(cfg.ep):
            n = int(plan.send_counts[d].sum())
            rows = plan.send_rows[d]
            assert (rows[:n] >= 0).all() and (rows[n:] == -1).all()
            local = ids[r].ravel()[rows[:n]] % E
            assert (ids[r].ravel()[rows[:n]] // E == d).all()
            # sorted by local expert, then t*k + j; counts per expert match
            assert (np.lexsort((rows[:n], local)) == np.arange(n)).all()
            assert (np.bincount(local, minlength=E) == plan.send_counts[d]).all()
        # token_rows point back at the row carrying (t, j)
        for t in range(cfg.tokens):
            for j in range(k):
                row = plan.token_rows[t, j]
                assert plan.send_rows[row // C, row % C] == t * k + j


def test_empty_routing_leaves_experts_without_rows():
    cfg = make_config("small", {})
    ids, _ = make_routing(cfg, "empty", seed=1)
    assert len(np.unique(ids)) < cfg.num_experts


def test_skewed_routing_is_skewed():
    cfg = make_config("small", {})
    ids, _ = make_routing(cfg, "skewed", seed=1)
    load = np.bincount(ids.ravel(), minlength=cfg.num_experts)
    assert load.max() > 2 * load.mean()
    assert (np.sort(ids, axis=-1)[..., 1:] != np.sort(ids, axis=-1)[..., :-1]).all()  # distinct per token


def test_routing_beyond_bucket_names_the_bucket_it_needs():
    cfg = make_config("small", {"recv_rows_per_src": 16})
    ids, weights = make_routing(cfg, "skewed", seed=0)
    need = rows_needed(cfg, ids).max()
    with pytest.raises(RoutingError, match=r"sends \d+ rows to rank \d+; the SSC bucket holds C=16; compile with "
                                           rf"--recv-rows-per-src {-(-need // 16) * 16}$"):
        check_routing(cfg, ids, weights)


@pytest.mark.parametrize("bad, message", [
    (lambda ids: ids[:, :-1], "must have shape"),
    (lambda ids: ids + 100, "must lie in"),
    (lambda ids: ids.astype(np.float32), "must be integers"),
])
def test_bad_topk_ids_rejected(bad, message):
    cfg = make_config("small", {})
    ids, weights = make_routing(cfg, "random", seed=0)
    with pytest.raises(RoutingError, match=message):
        check_routing(cfg, bad(ids), weights if bad(ids).shape == ids.shape else weights[:, :-1])
