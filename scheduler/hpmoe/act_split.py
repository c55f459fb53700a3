"""Column split of the activation tasks (SwiGLU and its gradient), on request (cfg.act_n_block).

A SwiGLU task is one row tile times the whole width I by default: at Mixtral's I = 14336 that is 11 MB a
task on one vector worker, and every GMM2 block of the row waits on it. Split, the task for columns
[c0, c0 + m) of A reads H's gate columns [c0, c0 + m) and up columns [I + c0, I + c0 + m) (two input regions
of H, one wait: events.py merges the producers of one slot's regions) and writes A's columns [c0, c0 + m);
the gradient task reads dA's and H's same columns and writes dH's gate and up columns (two output regions).
SwiGLU is elementwise, so the outputs are bitwise those of the whole width.

Rule (cfg.act_n_block == 0): whole rows, in both directions; an explicit cfg.act_n_block splits both, and a
block of I or more keeps the whole width. History: the forward's SwiGLU was split into the GMM
block when the GMM column split was in force with mixed queues and no row pipelines (Mixtral-8x7B experts,
4096 tokens, one H200: forward 6.82 -> 6.15 ms, when the last row tile's whole-width SwiGLU was the forward's
tail on a vector-queue block). Since the SwiGLU tasks are pool units and compute on the SFU (session 18,
swiglu_math.cuh), whole rows are the faster forward: traces at Mixtral-8x7B 4096 tokens 5.46 against 5.66 ms
(and 5.29 / 5.58, 5.55 / 5.80 with the library before), Mixtral-8x22B 4096 8.59 against 9.01, Mixtral-8x7B
1024 2.23 against 2.27. A task of 512 columns took 37 us where whole rows take 18 us per as many elements:
about 19 us a task of fixed cost (presumably its rows' 256 bulk copies of 1 KB, which one thread issues;
benchmarks/cuda_results/h200_session18_swiglu.txt).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import ConfigError
from .gmm_split import column_blocks, n_block
from .ssc_format import FUSED_SWIGLU_GROUP, MAX_TRIGGERS, TaskType
from .wgrad_split import wgrad_col_blocks

if TYPE_CHECKING:
    from .config import MoeConfig


def check_block(cfg: MoeConfig) -> None:
    """Refuse an explicit act_n_block whose tasks would break a Task Descriptor's limits (ConfigError).

    - A multiple of the GMM block (when GMM1 is split): a GMM1 block then overlaps at most two SwiGLU tasks
      (its gate part one, its up part one, or two across the gate/up seam), and a task triggers at most two
      events; with blocks that cross GMM blocks it could feed three.
    - With weights_transposed, a multiple of wgrad_tile: each dW1t tile reads one wgrad_tile-wide column
      block of dH over all rows, and one that straddled two SwiGLU-gradient blocks would be a third event
      for them (beside the gate-gradient row tile and their own block's tiles).
    - With dW1 in column blocks (wgrad_n_block), at most one event for the dW1 blocks a SwiGLU-gradient task
      feeds (_dw1_events), beside the gate gradient's: its gate and up columns land in different blocks, which
      share one event when they wait on the same tasks (I a multiple of the block, and act_n_block a divisor
      or a multiple of it), and need two or more otherwise (DBRX's I = 10752 with 1024-column blocks: two).
    """
    m = cfg.act_n_block
    if m == 0 or m >= cfg.inter or cfg.fuse_swiglu:  # fused tasks: config.resolve checks their block
        return
    n = n_block(cfg)
    if 0 < n < 2 * cfg.inter and m % n:
        raise ConfigError(f"act_n_block={m} is not a multiple of the GMM column block {n}: a GMM1 block would "
                          f"feed more than two SwiGLU tasks")
    if cfg.weights_transposed and m % cfg.wgrad_tile:
        raise ConfigError(f"act_n_block={m} is not a multiple of wgrad_tile={cfg.wgrad_tile}: with "
                          f"weights_transposed each dW1 tile must read one SwiGLU-gradient column block")
    fed = 0 if cfg.weights_transposed else _dw1_events(cfg)
    if fed > MAX_TRIGGERS - 1:
        raise ConfigError(f"act_n_block={m}: a SwiGLU-gradient task would feed {fed} column blocks of "
                          f"dW1 (wgrad_n_block={cfg.wgrad_n_block}, I={cfg.inter}) that wait on different tasks, "
                          f"besides the gate gradient, and a task triggers at most {MAX_TRIGGERS} events: use whole "
                          f"rows (act_n_block 0), or a wgrad_n_block that divides I and is a divisor or a multiple "
                          f"of act_n_block")


def _dw1_events(cfg: MoeConfig) -> int:
    """The most events one SwiGLU-gradient task of an explicit act_n_block triggers for dW1's column-block
    tasks (dW1 = X^T dH, [h, 2I]: a task writes dH's gate columns [c0, c0 + m) and up columns [I + c0, I + c0 + m)).
    Each dW1 block waits on the tasks writing its columns; blocks waiting on the same tasks share one event."""
    blocks = wgrad_col_blocks(cfg, 2 * cfg.inter)
    if len(blocks) == 1:
        return 1  # the whole width: one dW1 task per row slab, reading every task's columns
    acts = act_blocks(cfg)

    def writers(b0: int, width: int) -> frozenset[int]:  # the act blocks writing dH columns [b0, b0 + width)
        return frozenset(i for i, (c0, m) in enumerate(acts) for lo in (c0, cfg.inter + c0)
                         if lo < b0 + width and b0 < lo + m)

    sets = [writers(b0, width) for b0, width in blocks]
    return max(len({s for s in sets if i in s}) for i in range(len(acts)))


def act_n_block(cfg: MoeConfig) -> int:
    """Columns of A per SwiGLU and SwiGLU-gradient task in force (0: whole width); one block for both."""
    return 0 if cfg.act_n_block >= cfg.inter else cfg.act_n_block


def act_blocks(cfg: MoeConfig) -> list[tuple[int, int]]:
    """(first column of A, columns) of each SwiGLU (or SwiGLU-gradient) task of a row tile, left to right."""
    return column_blocks(cfg.inter, act_n_block(cfg))


def fused_blocks(cfg: MoeConfig, task_type: TaskType) -> list[tuple[int, int]]:
    """(first column of A, columns) of each fused task of a row tile (cfg.fuse_swiglu), left to right. Each
    costs what the unfused GMM task did: GMM_SWIGLU's block is half the GMM column block (its tiles compute a
    gate and an up column per column of A), GMM_SWIGLU_GRAD's the block itself; whole groups of
    FUSED_SWIGLU_GROUP columns; an explicit act_n_block applies to both."""
    group = FUSED_SWIGLU_GROUP
    block = cfg.act_n_block or n_block(cfg)
    if not cfg.act_n_block and block and task_type == TaskType.GMM_SWIGLU:
        block = max(group, block // 2 // group * group)
    elif block:
        block = max(group, block // group * group)
    return column_blocks(cfg.inter, 0 if block >= cfg.inter else block)
