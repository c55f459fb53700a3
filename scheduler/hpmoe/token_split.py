"""Tokens per top-k reduction task (combine reduce, backward combine reduce, router-weight gradient) for the
GPU deals.

These tasks all become ready at the end of a direction (each waits on the combine puts of its tokens' rows,
which come from every expert), so their count sets the direction's tail: with the default of one task per
tile_m tokens, DeepSeek-V3 experts at 1024 tokens gave 8 tasks of 0.6-1.0 ms each on 8 of 132 blocks, a
third of the forward (one H200 trace, benchmarks/RESULTS.md). The rule gives every worker block one task:
the least multiple of 8 tokens that needs no more tasks than there are workers, never more than tile_m.
"""
from __future__ import annotations

import math

from .config import round_up


def auto_token_tile(tokens: int, workers: int, tile_m: int) -> int:
    """Tokens per reduction task so that `workers` blocks share the reductions in one wave."""
    if tokens <= 0 or workers <= 0:
        raise ValueError(f"auto_token_tile: tokens={tokens} and workers={workers} must be positive")
    return min(tile_m, max(8, round_up(math.ceil(tokens / workers), 8)))
