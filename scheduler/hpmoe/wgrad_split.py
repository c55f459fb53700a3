"""Column split of the weight-gradient tasks: units that share their X^T slab in L2.

A weight-gradient task is one wgrad_tile-row slab of dW[e] across all its columns by default, so each cube
worker reads its own slab of X^T (wgrad_tile columns of X over the expert's rows) once per output tile. When
the workers' slabs together are larger than the GPU's L2 (DeepSeek-V3 experts at 8192 tokens: 128 blocks x
128 x 8192 rows x 2 bytes = 268 MB against 50 MB), every tile reads its slab from DRAM again; a timing-only
build in which all units of an expert read one slab ran the fwd+bwd kernels 6% faster (one H200,
docs/cuda.md "What the backward waits on"). Split into column blocks, the units of one slab are consecutive in
claim order (expert, slab, column block: fill.py), so the blocks that take them at the same time read the
slab once between them.

Rule (cfg.wgrad_n_block == 0): only with the claim pool (the GPU's deal; the AscendC kernel and the A3 model
take whole widths and refuse the pool), and only when num_aic slabs of the expected rows per expert exceed
L2_BYTES; then WGRAD_N_BLOCK columns. An explicit cfg.wgrad_n_block (a multiple of 8) is used with the claim
pool and ignored without it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .gmm_split import busy_row_tiles

if TYPE_CHECKING:
    from .config import MoeConfig

L2_BYTES = 50 * 2**20  # H100 / H200 L2
WGRAD_N_BLOCK = 1024  # four 256-column GPU tiles per unit: the claim is a small share of each unit's time


def slab_bytes(cfg: MoeConfig) -> int:
    """X^T bytes that the cube workers' weight-gradient units hold at once (expected rows per expert)."""
    rows_per_expert = busy_row_tiles(cfg) * cfg.tile_m // cfg.experts_per_rank
    return cfg.num_aic * cfg.wgrad_tile * rows_per_expert * 2


def wgrad_n_block(cfg: MoeConfig) -> int:
    """Columns per weight-gradient task in force (0: the whole width)."""
    if not cfg.claim_pool:
        return 0
    if cfg.wgrad_n_block:
        return cfg.wgrad_n_block
    return WGRAD_N_BLOCK if slab_bytes(cfg) > L2_BYTES else 0


def wgrad_col_blocks(cfg: MoeConfig, width: int) -> list[tuple[int, int]]:
    """(first column, columns) of each weight-gradient task of an output `width` columns wide, left to right."""
    block = wgrad_n_block(cfg)
    if block == 0 or block >= width:
        return [(0, width)]
    return [(c0, min(block, width - c0)) for c0 in range(0, width, block)]
