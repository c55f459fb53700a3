"""Column split of the weight-gradient tasks: units that read one block of dY (or dH) together.

A weight-gradient task is one wgrad_tile-row slab of dW[e] across all its columns unless split into column
blocks (cfg.wgrad_n_block columns, a multiple of 8; only with the claim pool: the GPU's deal; the AscendC
kernel and the A3 model take whole widths and refuse the pool). The pool claims the units of one expert
column block by column block, every slab of a block one after another (worker_queues._pool_units), so the
blocks that run them at the same time read that block of dY once between them, while L2 holds it; a unit is
a few output tiles long, so its readers stay in step. A whole-width unit walks all of dY[e] (58.7 MB at
Mixtral-8x7B's 28672 columns), more than L2 holds between readers that started apart.

Measured (one H200, traced kernels, orders alternating in one call): with 1024-column blocks claimed column
block by column block, backward Mixtral-8x7B 4096 12.73 / 13.03 ms against 13.13 / 13.34 whole, DeepSeek-V3
8192 21.15 / 21.27 against 21.54 / 22.13; claimed slab by slab instead (the first order tried), DeepSeek-V3
8192 took 24.1 / 24.7 ms (docs/cuda.md, "Per phase and per tile"). MoeFfnRuntime uses
DEFAULT_BLOCK where an output is wider than it (default_wgrad_n_block); the compiler alone never splits.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .gmm_split import column_blocks

if TYPE_CHECKING:
    from .config import MoeConfig


DEFAULT_BLOCK = 1024  # columns per unit where MoeFfnRuntime splits (measured above)


def default_wgrad_n_block(hidden: int, inter: int) -> int:
    """The op's choice: DEFAULT_BLOCK where a weight gradient (h or 2I columns wide) is wider, else whole."""
    return DEFAULT_BLOCK if max(hidden, 2 * inter) > DEFAULT_BLOCK else 0


def wgrad_n_block(cfg: MoeConfig) -> int:
    """Columns per weight-gradient task in force (0: the whole width)."""
    return cfg.wgrad_n_block if cfg.claim_pool else 0


def wgrad_col_blocks(cfg: MoeConfig, width: int) -> list[tuple[int, int]]:
    """(first column, columns) of each weight-gradient task of an output `width` columns wide, left to right."""
    return column_blocks(width, wgrad_n_block(cfg))
