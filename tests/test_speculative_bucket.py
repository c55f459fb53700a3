"""The speculative bucket's arithmetic (hpmoe.speculative_bucket), which the PyTorch op's runtime applies on
the GPU: passes cover every token once and always fit, as few as possible; a bucket grows to hold the need,
by at least 1.25x, never past the bucket that holds any routing."""
from __future__ import annotations

import pytest

from hpmoe.config import make_config
from hpmoe.errors import HpmoeError
from hpmoe.speculative_bucket import GROWTH, grown_rows, least_rows, pass_ranges


def cfg(tokens=512, ep=4, experts=8, topk=8, aligned=False):
    c = make_config(None, {"ep": ep, "tokens": tokens, "hidden": 256, "inter": 128, "experts_per_rank": experts,
                           "topk": topk, "dtype": "bf16", "tile_m": 128, "num_aic": 4, "num_aiv": 4})
    return c.replace(expert_aligned=True, recv_rows_per_src=0) if aligned else c


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("tokens,topk,experts", [(512, 8, 8), (1000, 2, 8), (333, 6, 2), (8192, 8, 8)])
@pytest.mark.parametrize("rows", [384, 1024, 4096, 20480])
def test_passes_cover_every_token_once_fit_and_are_fewest(aligned, tokens, topk, experts, rows):
    c = cfg(tokens, topk=topk, experts=experts, aligned=aligned)
    if rows < least_rows(c):
        with pytest.raises(HpmoeError, match="cannot hold the rows of even one token"):
            pass_ranges(c, rows)
        return
    ranges = pass_ranges(c, rows)
    assert ranges[0][0] == 0 and ranges[-1][1] == tokens
    assert all(b < e for b, e in ranges) and all(e == b2 for (_, e), (b2, _) in zip(ranges, ranges[1:]))
    widest = max(e - b for b, e in ranges)
    assert c.rows_per_pair(widest, distinct=False) <= rows  # any routing of a pass fits, repeated ids too
    if len(ranges) > 1:  # one pass fewer would leave a range whose worst routing does not fit
        assert c.rows_per_pair(-(-tokens // (len(ranges) - 1)), distinct=False) > rows


def test_least_rows_counts_a_token_s_k_rows_and_the_pads_of_aligned_experts():
    assert least_rows(cfg(topk=8)) == 128  # 8 rows, one row tile
    assert least_rows(cfg(topk=8, aligned=True)) == 8 * 128  # 8 rows, each its expert's row tile (8 + 8 * 127)


@pytest.mark.parametrize("now,need", [(1024, 1000), (1024, 1030), (1024, 4000), (3968, 4096), (4096, 4096)])
def test_growth_holds_the_need_by_at_least_the_factor_and_never_past_any_routing(now, need):
    c = cfg(tokens=512)  # any routing: 512 * 8 = 4096 rows per source
    got = grown_rows(c, now, need)
    most = 4096
    if need <= now:
        assert got == now
        return
    assert got % c.tile_m == 0 and got >= need
    assert got >= min(most, now * GROWTH) and got <= max(most, -(-need // 128) * 128)
