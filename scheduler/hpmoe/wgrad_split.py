"""Column split of the weight-gradient tasks: units that share their X^T slab in L2 (opt-in).

A weight-gradient task is one wgrad_tile-row slab of dW[e] across all its columns by default, so each cube
worker reads its own slab of X^T (wgrad_tile columns of X over the expert's rows) once per output tile. When
the workers' slabs together are larger than the GPU's L2 (DeepSeek-V3 experts at 8192 tokens: 128 blocks x
128 x 8192 rows x 2 bytes = 268 MB against 50 MB), every tile reads its slab from DRAM again; a timing-only
build in which all units of an expert read one slab ran the fwd+bwd kernels 6% faster (one H200,
docs/cuda.md "What the backward waits on"). Split into column blocks (cfg.wgrad_n_block columns, a multiple
of 8), the units of one slab are consecutive in claim order (expert, slab, column block: fill.py), so the
blocks that take them at the same time read the slab once between them.

Measured with 1024-column blocks against whole widths (one H200, fwd+bwd kernels, alternating): DeepSeek-V3
at 4096 tokens 2.7% faster, Qwen3-30B-A3B at 8192 2.3% faster, but DeepSeek-V3 at 8192 tokens 6% slower
(33.2 against 35.3 ms; not yet understood). So the compiler never splits on its own: the split is used only
when cfg.wgrad_n_block asks for it, and only with the claim pool (the GPU's deal; the AscendC kernel and the
A3 model take whole widths and refuse the pool).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .gmm_split import column_blocks

if TYPE_CHECKING:
    from .config import MoeConfig


def wgrad_n_block(cfg: MoeConfig) -> int:
    """Columns per weight-gradient task in force (0: the whole width)."""
    return cfg.wgrad_n_block if cfg.claim_pool else 0


def wgrad_col_blocks(cfg: MoeConfig, width: int) -> list[tuple[int, int]]:
    """(first column, columns) of each weight-gradient task of an output `width` columns wide, left to right."""
    return column_blocks(width, wgrad_n_block(cfg))
