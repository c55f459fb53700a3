"""The speculative bucket's arithmetic (hpmoe.speculative_bucket), which the PyTorch op's runtime applies on
the GPU: passes cover every token once and always fit, as few as possible; a bucket grows to hold the need,
by at least 1.25x, never past the bucket that holds any routing."""
from __future__ import annotations

import pytest

from hpmoe.config import make_config, round_up
from hpmoe.errors import HpmoeError
from hpmoe.speculative_bucket import GROWTH, first_rows, grown_rows, ladder_rows, least_rows, pass_ranges


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


def test_layers_outgrowing_one_first_bucket_land_on_shared_steps():
    """Buckets grow along one ladder per shape (first_rows, then GROWTH x, rounded to tile_m): layers whose
    routings need different rows share the step that holds them, so one compiled schedule serves them all.
    The needs are those of the transformers example's four layers at EP 4 (session 36: 6912-7680 rows from a
    first bucket of 5120), where growing to each need compiled four schedules."""
    c = make_config(None, {"ep": 4, "tokens": 4096, "hidden": 1024, "inter": 512, "experts_per_rank": 4, "topk": 4,
                           "dtype": "bf16", "tile_m": 128})
    first = first_rows(c)
    assert first == c.recv_rows_per_src == 5120
    grown = {need: grown_rows(c, first, need) for need in (6912, 7168, 7296, 7680)}
    assert set(grown.values()) == {8064}, grown  # 5120 -> 6400 -> 8064 (6400 holds none of them)
    ladder, rows = [first], first
    while rows < round_up(c.max_rows_per_pair, c.tile_m):
        rows = grown_rows(c, rows, rows + 1)
        ladder.append(rows)
    assert ladder == [5120, 6400, 8064, 10112, 12672, 15872, 16384], ladder  # the last: any routing fits
    for now in ladder[:-1]:  # from any step, any need lands on a step (or the need itself past the last)
        for need in range(now + 1, ladder[-1] + 1, 97):
            assert grown_rows(c, now, need) in ladder


@pytest.mark.parametrize("aligned", [False, True])
def test_the_ladder_starts_where_one_token_fits(aligned):
    c = cfg(tokens=8, topk=8, aligned=aligned)  # few tokens: one token's aligned rows exceed the config's C
    assert first_rows(c) == max(c.recv_rows_per_src, least_rows(c))
    assert ladder_rows(c, 1) == first_rows(c) and ladder_rows(c, first_rows(c) + 1) > first_rows(c)
