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


def first_rows(cfg: MoeConfig) -> int:
    """A shape's first bucket: the config's C, and at least one token's rows, so that passes of one token each
    always fit (expert_aligned pads)."""
    return max(cfg.recv_rows_per_src, least_rows(cfg))


def ladder_rows(cfg: MoeConfig, need: int, floor: int = 0) -> int:
    """The smallest bucket of `cfg`'s ladder holding `need` rows per source and `floor`: the first bucket
    (first_rows), then GROWTH x the last, each rounded to tile_m; capped at the bucket that holds any
    routing, never below `need` (rounded to tile_m). Layers of one shape that outgrow the same first bucket
    land on the same steps, so they share one compiled schedule a step; growing to the need itself gave every
    layer sizes of its own (one SSC compile each: 1.7 of the 3.0 s that 14 heap generations took at EP 4 in
    the transformers example, benchmarks/RESULTS.md session 36)."""
    most = round_up(cfg.max_rows_per_pair, cfg.tile_m)
    rung = first_rows(cfg)
    while rung < max(need, floor) and rung < most:
        rung = round_up(int(rung * GROWTH), cfg.tile_m)
    return max(round_up(need, cfg.tile_m), min(most, rung))


def grown_rows(cfg: MoeConfig, now: int, need: int) -> int:
    """The bucket after a forward needed `need` rows per source where the bucket is `now`: `now` if it fits,
    else the ladder's bucket holding the need and GROWTH x now (ladder_rows)."""
    if need <= now:
        return now
    return ladder_rows(cfg, need, int(now * GROWTH))
