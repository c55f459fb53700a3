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
8192 took 24.1 / 24.7 ms (docs/cuda.md, "Per phase and per tile"). MoeFfnRuntime splits where an output is
wider than its block (default_wgrad_n_block: DEFAULT_BLOCK, or wider, below); the compiler alone never splits.

Where an expert gets few rows, a 1024-column unit is short (4 tiles of K = its rows), and the step between two
units (claim, descriptor loads, waits, signals: 11-14k cycles, docs/cuda.md "Time between tasks") becomes a
large share of it. So the op widens the block until a unit holds at least TARGET_UNIT_STEPS K steps of the tile
(64 rows each) at the expected rows per expert. Measured (one H200, fwd+bwd kernels, builds alternating,
two rounds per call, session 20; benchmarks/RESULTS.md): Qwen3-235B-A22B experts at 4096 tokens (256 rows an
expert, 4 K steps a tile) 14.60 / 14.48 ms at 1024 columns, 14.19 / 14.20 at 2048, 13.69 / 13.94 whole, and in
a second call 14.51 / 14.42 at 1024 against 13.81 / 13.71 whole. At 1024 rows an expert (Mixtral-8x7B,
Mixtral-8x22B, DBRX: 64 steps a 1024-column unit) 2048 columns measured within the spread of single calls then
(session 20). In the training loop (session 34, `benchmarks/cuda_loop_options.sh`, each option set against the
PyTorch path in its own run, two runs of two blocks each) a unit of 128 steps is faster or on par: ms a step at
1024 / 2048 columns, Mixtral-8x22B 34.69, 34.68 / 34.30, 34.20; DBRX 44.41, 44.24 / 43.92, 43.91; DeepSeek-V3
at 1024 tokens 5.08, 5.08 / 5.03, 5.04; Mixtral-8x7B 20.29, 20.28 / 20.25, 20.29; gpt-oss-20b at 2048 / 4096
columns 7.99, 7.99 / 7.98, 7.98. DeepSeek-V3 at 4096 tokens and more keeps DEFAULT_BLOCK (its tiles are long).
A worker that is a 2-block cluster deals a unit's column tiles between its blocks, each holding half the steps:
64 a block at the Mixtrals, the measured best for that build (session 33: 2048 columns 3-4% faster than 1024).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .gmm_split import GMM_TILE_N, column_blocks

if TYPE_CHECKING:
    from .config import MoeConfig


DEFAULT_BLOCK = 1024  # columns per unit where MoeFfnRuntime splits (measured above)
TARGET_UNIT_STEPS = 128  # K steps a unit should hold at the expected rows per expert (measured above)
K_STEP = 64  # rows per K step of the CUDA tile (op_kernel/cuda/block_gemm_wgmma.cuh kBK)


def default_wgrad_n_block(hidden: int, inter: int, rows_per_expert: float | None = None) -> int:
    """The op's choice of columns per unit: DEFAULT_BLOCK, or wider where an expert's expected rows make that
    unit shorter than TARGET_UNIT_STEPS K steps; 0 (whole widths) where no weight gradient (h or 2I columns) is
    wider than the block."""
    block = DEFAULT_BLOCK
    if rows_per_expert:
        steps_per_tile = max(1, math.ceil(rows_per_expert / K_STEP))
        block = max(block, GMM_TILE_N * math.ceil(TARGET_UNIT_STEPS / steps_per_tile))
    return block if max(hidden, 2 * inter) > block else 0


def wgrad_n_block(cfg: MoeConfig) -> int:
    """Columns per weight-gradient task in force (0: the whole width)."""
    return cfg.wgrad_n_block if cfg.claim_pool else 0


def wgrad_col_blocks(cfg: MoeConfig, width: int) -> list[tuple[int, int]]:
    """(first column, columns) of each weight-gradient task of an output `width` columns wide, left to right."""
    return column_blocks(width, wgrad_n_block(cfg))
