"""benchmarks/ep_traffic.py (torch-free): rows, FLOPs and link bytes of an EP step, against counts made by hand
and against a plain loop over every pair."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import ep_traffic  # noqa: E402

from hpmoe.config import make_config  # noqa: E402
from hpmoe.runtime.routing import make_routing  # noqa: E402


def test_rows_by_hand():
    # 2 ranks of 2 experts, 2 tokens each, top-2. Rank 0: token 0 -> experts 0, 3; token 1 -> 2, 3.
    # Rank 1: token 0 -> 1, 2; token 1 -> 0, 3.
    ids = np.array([[[0, 3], [2, 3]], [[1, 2], [0, 3]]])
    rows = ep_traffic.rank_rows(ids, 2)
    assert rows["received"].tolist() == [3, 5]   # rank 0's experts: 0 (from r0), 1, 0 (from r1)
    assert rows["sent"].tolist() == [3, 2]       # rank 0 sends to 3, 2, 3; rank 1 to 1, 0
    assert rows["returned"].tolist() == [2, 3]   # rank 0's experts computed 2 rows for rank 1, rank 1's 3 for rank 0


@pytest.mark.parametrize("routing", ["balanced", "random", "skewed"])
def test_rows_against_a_loop_over_pairs(routing):
    cfg = make_config("deepseek-v3", {"ep": 4, "tokens": 256})
    ids, _ = make_routing(cfg, routing, 0)
    E = cfg.experts_per_rank
    want = {"received": np.zeros(4, int), "sent": np.zeros(4, int), "returned": np.zeros(4, int)}
    for src in range(4):
        for e in ids[src].reshape(-1):
            dst = int(e) // E
            want["received"][dst] += 1
            if dst != src:
                want["sent"][src] += 1
                want["returned"][dst] += 1
    got = ep_traffic.rank_rows(ids, E)
    for key in want:
        assert got[key].tolist() == want[key].tolist(), key
    assert got["received"].sum() == 4 * 256 * cfg.topk  # every pair lands somewhere once


def test_balanced_deepseek_v3_figures():
    # EP 4, 8192 tokens a GPU, top-8 balanced: each rank's experts get T k rows; 3/4 of each rank's rows leave it.
    cfg = make_config("deepseek-v3", {"ep": 4, "tokens": 8192})
    ids, _ = make_routing(cfg, "balanced", 0)
    figures = ep_traffic.per_gpu(ids, cfg.experts_per_rank, cfg.hidden, cfg.inter, step_ms=40.0)
    rows = 8192 * 8
    flops = 18.0 * rows * cfg.hidden * cfg.inter  # 3 x (2 R h 2I + 2 R I h)
    assert figures["tflops_per_gpu"] == pytest.approx(flops / 0.040 / 1e12, rel=1e-12)
    sent = returned = rows * 3 / 4
    assert figures["link_gb_s_per_gpu"] == pytest.approx(2 * (sent + returned) * cfg.hidden * 2 / 0.040 / 1e9,
                                                         rel=1e-12)
    assert figures["max_over_mean_rows"] == pytest.approx(1.0)
    # The forward alone (cuda_user_step.py's GMM-in-the-loop figure): GMM1 2 R h 2I + GMM2 2 R I h.
    assert ep_traffic.gemm_flops(rows, cfg.hidden, cfg.inter, False) == 6.0 * rows * cfg.hidden * cfg.inter


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match=r"\[ep, T, k\]"):
        ep_traffic.rank_rows(np.zeros((4, 8)), 2)
    with pytest.raises(ValueError, match="outside"):
        ep_traffic.rank_rows(np.full((2, 1, 1), 4), 2)
    with pytest.raises(ValueError, match="positive"):
        ep_traffic.per_gpu(np.zeros((1, 1, 1), int), 1, 8, 8, step_ms=0)
