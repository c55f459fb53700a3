"""The arithmetic of the speculative bucket (docs/cuda.md, "Routing beyond the bucket"), free of any framework:
the token ranges an overflowed forward runs as passes, the smallest bucket such passes need, and how a
bucket grows when a forward's agreed need exceeded it. hpmoe.torch's runtime applies them."""
from __future__ import annotations

from .config import MoeConfig, round_up
from .errors import HpmoeError

GROWTH = 1.25  # at least this factor per growth, as the reference implementation's heap manager grows


def least_rows(cfg: MoeConfig) -> int:
    """The smallest bucket in which a pass of one token always fits (k rows even if its ids repeat, and under
    expert_aligned the pads of every expert they touch), rounded to tile_m."""
    return round_up(cfg.rows_per_pair(1, distinct=False), cfg.tile_m)


def pass_ranges(cfg: MoeConfig, rows: int) -> list[tuple[int, int]]:
    """Token ranges [begin, end) covering [0, cfg.tokens): the fewest equal ranges whose rows fit a bucket of
    `rows` per source whatever the routing (k rows per token, even if a token's ids repeat)."""
    lo, hi = 0, cfg.tokens  # the most tokens that always fit (rows_per_pair grows with tokens)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if cfg.rows_per_pair(mid, distinct=False) <= rows else (lo, mid - 1)
    if lo < 1:
        raise HpmoeError(f"bucket C={rows} cannot hold the rows of even one token (top-{cfg.topk}, tile_m "
                         f"{cfg.tile_m}; at least {least_rows(cfg)}): raise capacity_factor")
    n = -(-cfg.tokens // lo)
    size = -(-cfg.tokens // n)
    return [(b, min(cfg.tokens, b + size)) for b in range(0, cfg.tokens, size)]


def grown_rows(cfg: MoeConfig, now: int, need: int) -> int:
    """The bucket after a forward needed `need` rows per source where the bucket is `now`: `now` if it fits,
    else at least the need and GROWTH x now, capped at the bucket that holds any routing (never below the
    need), rounded to tile_m."""
    if need <= now:
        return now
    most = round_up(cfg.max_rows_per_pair, cfg.tile_m)
    return max(round_up(need, cfg.tile_m), min(most, round_up(int(now * GROWTH), cfg.tile_m)))
