"""Column split of the row-tiled GMM tasks: a schedule for wide experts and few rows.

A GMM task is one row tile times the whole expert width by default. When the expected busy row tiles are
fewer than the cube workers (Mixtral: h 4096, I 14336, top-2 at 4096 tokens gives 64 row tiles for 112
GPU blocks), each GMM op's output columns are split into blocks of `cols_per_task` columns, one task each;
events follow from the regions (a whole-row SwiGLU waits on every block of its row tile; act_split.py splits
SwiGLU into column blocks when asked).

Rule (cfg.gmm_n_block == 0): split only for the GPU deals (mixed queues; the AscendC kernel and the A3
model take whole widths and refuse mixed queues anyway), not with row pipelines (a chain is one unit, so a
split would add tasks, not parallelism), and not when the busy row tiles fill the cube workers
(chain_waves at least MIN_CHAIN_WAVES). Then the block is the largest multiple of the GPU tile's N
(GMM_TILE_N) that gives the narrowest GMM op at least ceil(workers / tiles) blocks (2 when the tiles are as
many as the workers or more), and never less than GMM_TILE_N. An explicit cfg.gmm_n_block (a multiple of 8, e.g. from `hpmoe tune`) wins. With the first GMM claimed
from the pool (cfg.first_gmm_pool, MoEFFN's default under mixed queues: default_first_gmm_pool) the block is
POOLED_FIRST_GMM_BLOCK: the pool balances the units, and short units keep a weight panel's readers together.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # config.py checks act_n_block through act_split, which imports this module
    from .config import MoeConfig

GMM_TILE_N = 256  # output columns of one CUDA GMM tile (op_kernel/cuda/block_gemm_wgmma.cuh kBN)


def gmm_widths(cfg: MoeConfig) -> tuple[int, ...]:
    """Output widths of the row-tiled GMM ops: GMM1 2I, GMM2 h; activation gradient I, gate gradient h."""
    return (2 * cfg.inter, cfg.hidden, cfg.inter)


def expected_tiles_per_expert(rows: float, tile_m: int) -> float:
    """E[ceil(c / tile_m)] for an expert's row count c about `rows`: random routing spreads c about its mean
    with a standard deviation of about sqrt(rows) (normal approximation; sum over j >= 0 of P(c > j tile_m))."""
    if rows <= 0:
        return 0.0
    sigma = max(math.sqrt(rows), 1e-9)
    total, j = 0.0, 0
    while j * tile_m < rows + 8 * sigma:
        total += 0.5 * math.erfc((j * tile_m - rows) / (sigma * math.sqrt(2)))
        j += 1
    return total


def busy_row_tiles(cfg: MoeConfig) -> int:
    """Row tiles per rank that balanced routing fills (T*k/ep rows from each source, up to C; with
    expert_aligned each local expert's T*k/(ep*E) rows, spread as random routing spreads them, in whole tiles
    of their own)."""
    per_pair = min(cfg.recv_rows_per_src, cfg.tokens * cfg.topk / cfg.ep)
    if cfg.expert_aligned:
        tiles = cfg.experts_per_rank * expected_tiles_per_expert(per_pair / cfg.experts_per_rank, cfg.tile_m)
        return cfg.ep * max(1, min(cfg.chunks_per_src, round(tiles)))
    return cfg.ep * max(1, math.ceil(per_pair / cfg.tile_m))


# Below this many tiles of GMM work per worker block, row tiles are too few for whole-width tasks (see
# chain_waves): DBRX, gpt-oss-20b and Qwen1.5-MoE experts at 4096 tokens have 128 row tiles for 132 blocks.
MIN_CHAIN_WAVES = 1.5


def straddled_row_tiles(cfg: MoeConfig) -> int:
    """Row tiles that hold two experts' rows, about one per expert boundary of each source: a GMM task runs one
    GEMM tile per expert segment of its row tile, so such a task costs about two. None with expert_aligned."""
    if cfg.expert_aligned:
        return 0
    return min(busy_row_tiles(cfg), cfg.ep * (cfg.experts_per_rank - 1))


def chain_waves(cfg: MoeConfig) -> float:
    """GMM work per worker block in whole-width row tiles (busy tiles plus the straddled tiles' second GEMM),
    over all the blocks (num_aic + num_aiv, which a queue split only moves between roles, so that the runtime's
    choice of queues and this module's block agree).
    Near 1 the straddled tasks, twice as long, are the GMM's tail: one H200 trace of DBRX experts at 4096
    tokens (128 row tiles, 16 experts, row pipelines on 128 blocks) had 15 blocks busy for the forward's last
    45%."""
    return (busy_row_tiles(cfg) + straddled_row_tiles(cfg)) / (cfg.num_aic + cfg.num_aiv)


def too_few_row_tiles(cfg: MoeConfig) -> bool:
    """Whole-width GMM tasks would leave cube workers idle: fewer busy row tiles than cube workers, or about as
    many with the straddled tiles' double cost (chain_waves below MIN_CHAIN_WAVES). MoEFFN then takes mixed
    queues (hpmoe.torch.runtime), and this rule splits their GMM ops."""
    return busy_row_tiles(cfg) < cfg.num_aic or chain_waves(cfg) < MIN_CHAIN_WAVES


# Columns per first-GMM unit when the first GMM is claimed in panel order (cfg.first_gmm_pool): two GPU tiles. One
# H200, fwd+bwd kernel ms, first GMM pooled with 256 / 512-column units against the static deal: Mixtral-8x22B
# 30.1 / 30.9 against 34.2, DBRX 39.0 / 38.6 against 42.4, gpt-oss-20b 7.24 / 6.96 against 7.48, Qwen1.5-MoE
# 3.92 / 3.63 against 3.80, DeepSeek-V3 at 1024 tokens 4.27 / 4.12 against 4.22, Mixtral-8x7B 17.34 / 18.04
# against 17.37 (benchmarks/RESULTS.md, session 12). One-tile units shared the weight panels best but many tiny
# SwiGLU tasks cost the smaller shapes their forward.
POOLED_FIRST_GMM_BLOCK = 2 * GMM_TILE_N


def auto_n_block(cfg: MoeConfig) -> int:
    """The compiler's column block for this shape (0: whole width)."""
    if not cfg.mixed_queues or cfg.row_pipelines or not too_few_row_tiles(cfg):
        return 0
    if cfg.first_gmm_pool:
        return 0 if POOLED_FIRST_GMM_BLOCK >= max(gmm_widths(cfg)) else POOLED_FIRST_GMM_BLOCK
    tiles = busy_row_tiles(cfg)
    # As many tiles as workers or more: tasks of half the width, so a straddled task's tail is half as long.
    splits = math.ceil(cfg.num_aic / tiles) if tiles < cfg.num_aic else 2
    block = max(GMM_TILE_N, (min(gmm_widths(cfg)) // splits) // GMM_TILE_N * GMM_TILE_N)
    return 0 if block >= max(gmm_widths(cfg)) else block


def whole_width_block(cfg: MoeConfig) -> int:
    """An explicit gmm_n_block that keeps every GMM op whole (for backends that only run whole widths)."""
    return -(-max(gmm_widths(cfg)) // 8) * 8


def n_block(cfg: MoeConfig) -> int:
    """Columns per GMM task in force (0: whole width)."""
    return cfg.gmm_n_block or auto_n_block(cfg)


def op_block(cfg: MoeConfig, k: int) -> int:
    """Columns per task of a GMM op whose K is `k` (0: whole width). The rule's block is sized for K = h (GMM1,
    the activation gradient); an op with a longer K (GMM2 and the gate gradient when I > h: Mixtral's 14336 and
    28672) gets proportionally fewer columns, so its tasks cost what the others' do: a 2048-column GMM2 task
    at I 14336 ran 1.6 ms, and the forward's last 2 ms were its 128 tasks on 112 blocks (one H200 trace). An
    explicit gmm_n_block is used as given for every op."""
    block = n_block(cfg)
    if block == 0 or cfg.gmm_n_block or k <= cfg.hidden:
        return block
    return max(GMM_TILE_N, (block * cfg.hidden // k) // GMM_TILE_N * GMM_TILE_N)


def column_blocks(width: int, block: int) -> list[tuple[int, int]]:
    """(first column, columns) of `width` columns in blocks of `block`, left to right (0 or a block of the
    width or more: the whole width). Shared by the GMM, activation and weight-gradient splits."""
    if block == 0 or block >= width:
        return [(0, width)]
    return [(c0, min(block, width - c0)) for c0 in range(0, width, block)]


def col_blocks(cfg: MoeConfig, width: int, k: int = 0) -> list[tuple[int, int]]:
    """(first column, columns) of each task of a GMM op writing `width` columns with inner dimension `k` (0:
    the rule's block as it is), left to right."""
    return column_blocks(width, op_block(cfg, k))


# MoEFFN aligns each local expert's rows to row tiles (expert_aligned) when that saves at least this share of
# the forward's expected GEMM tiles (busy tiles, plus the straddled ones unaligned) and, under mixed queues,
# grows the bucket's row tiles by at most MAX_MIXED_ROW_GROWTH: there every row tile's SwiGLU tasks run on the
# few vector-queue blocks, empty or not. One H200, fwd+bwd kernel ms aligned / unaligned, random routing, 4096
# tokens unless named (benchmarks/RESULTS.md, session 10). Row pipelines: Qwen3-235B-A22B 14.16 / 16.03 (16%
# fewer tiles), DeepSeek-V2-Lite 4.36 / 4.81 (12%), OLMoE 4.02 / 4.24 (10%), Qwen3-30B-A3B 2.78 / 2.86 (3%),
# 8192 tokens 5.24 / 5.32 (1%), DeepSeek-V3 16.46 / 15.96 (3%). Mixed queues: DBRX 43.39 / 46.57 (5%, rows
# +12%), gpt-oss-20b 7.15 / 7.36 (9%, +25%), Mixtral-8x7B 18.16 / 18.10 (4%, +12%), DeepSeek-V3 1024 tokens
# 4.34 / 4.31 (10%, +12%), Qwen1.5-MoE 4.52 / 3.94 (9%, +47%: 273 rows per expert, a third tile nearly empty).
MIN_ALIGNED_SAVING = 0.045
MAX_MIXED_ROW_GROWTH = 0.15


def default_expert_aligned(cfg: MoeConfig) -> bool:
    """Whether MoEFFN aligns each local expert's rows to row tiles at this shape (see MIN_ALIGNED_SAVING)."""
    plain = cfg.replace(expert_aligned=False, recv_rows_per_src=0)  # buckets of each layout's own size
    aligned = cfg.replace(expert_aligned=True, recv_rows_per_src=0)
    if busy_row_tiles(aligned) > (1 - MIN_ALIGNED_SAVING) * (busy_row_tiles(plain) + straddled_row_tiles(plain)):
        return False
    if not too_few_row_tiles(aligned):  # row pipelines: an empty tile's chain costs its block almost nothing
        return True
    return aligned.row_tiles <= (1 + MAX_MIXED_ROW_GROWTH) * plain.row_tiles


def default_first_gmm_pool(cfg: MoeConfig) -> bool:
    """Whether MoEFFN claims the first GMM in panel order (cfg.first_gmm_pool): wherever it takes mixed queues
    with the claim pool (measured, POOLED_FIRST_GMM_BLOCK)."""
    return cfg.mixed_queues and cfg.claim_pool and not cfg.row_pipelines
