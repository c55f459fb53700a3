"""Expected work of a task under balanced routing, for dealing a queue's order to its workers.

Units are arbitrary but consistent within a queue type: multiply-adds for cube tiles, elements moved or
computed for vector tiles. Under balanced routing every (source, destination) pair carries T*k/ep rows, so the
valid rows of a row tile are what its region keeps of each slot's first T*k/ep rows; tiles past them are
expected to be empty and cost only their fixed overhead.
"""
from __future__ import annotations

import heapq

from .config import MoeConfig
from .fill import RECV_SPACE
from .ssc_format import TaskType
from .tasks import Ref, Task

# Fixed cost of any task (fetch, waits, trigger), in the units of a small tile, so empty tiles still count.
TASK_OVERHEAD = 1024.0


def balanced_rows_per_pair(cfg: MoeConfig) -> float:
    return min(cfg.recv_rows_per_src, cfg.tokens * cfg.topk / cfg.ep)


def expected_valid_rows(cfg: MoeConfig, ref: Ref) -> float:
    """Rows of `ref` (a region of the receive-row space) that balanced routing fills."""
    C, per_pair = cfg.recv_rows_per_src, balanced_rows_per_pair(cfg)
    rows = 0.0
    first_slot, last_slot = ref.row_offset // C, (ref.row_end - 1) // C
    for slot in range(first_slot, last_slot + 1):
        lo = max(ref.row_offset, slot * C)
        hi = min(ref.row_end, slot * C + per_pair)
        rows += max(0.0, hi - lo)
    return rows


def expected_cost(cfg: MoeConfig, task: Task) -> float:
    t = task.task_type
    # Output 0 holds the GEMM's columns: H's block (GMM1, fused or not), dA's, or dH's gate half of the fused
    # gradient (as many as dA's).
    if t in (TaskType.GMM, TaskType.GMM_TRANS_B, TaskType.GMM_SWIGLU, TaskType.GMM_SWIGLU_GRAD):
        rows = expected_valid_rows(cfg, task.inputs[0])
        return TASK_OVERHEAD + rows * task.inputs[0].cols * task.outputs[0].cols
    if t == TaskType.GMM_WEIGHT_GRAD:
        expert_rows = cfg.ep * balanced_rows_per_pair(cfg) / cfg.experts_per_rank
        return TASK_OVERHEAD + expert_rows * task.outputs[0].rows * task.outputs[0].cols
    region = next((r for r in task.outputs if r.slot in RECV_SPACE), None) or \
        next((r for r in task.inputs if r.slot in RECV_SPACE), None)
    if t in (TaskType.DISPATCH_PUT, TaskType.BWD_DISPATCH_PUT, TaskType.COMBINE_PUT, TaskType.SWIGLU,
             TaskType.SWIGLU_GRAD, TaskType.ADD) and region is not None:
        cols = sum(r.cols for r in task.outputs if r.slot == region.slot)  # a SwiGLU-grad block: gate + up
        return TASK_OVERHEAD + expected_valid_rows(cfg, region) * (cols or region.cols)
    if t in (TaskType.COMBINE_REDUCE, TaskType.BWD_COMBINE_REDUCE, TaskType.TOPK_WEIGHT_GRAD):
        return TASK_OVERHEAD + task.outputs[0].rows * cfg.topk * cfg.hidden
    return TASK_OVERHEAD  # entry signals, count puts


def deal_by_expected_work(cfg: MoeConfig, ordered: list[Task], workers: int) -> list[list[Task]]:
    """Each task, in order, to the worker with the least expected work so far (see deal_units)."""
    return deal_units(cfg, [[t] for t in ordered], workers)


def deal_units(cfg: MoeConfig, units: list[list[Task]], workers: int) -> list[list[Task]]:
    """Each unit (tasks that stay together on one worker), in order, to the worker with the least expected
    work so far (lowest index on ties); units expected to be empty go round-robin instead. Greedy alone would
    hand a slot's whole run of expected-empty tiles to one worker, and skewed routing fills exactly those
    tiles of its hot slots. Every worker's queue stays a subsequence of the units' order, so a topological
    order stays one."""
    queues: list[list[Task]] = [[] for _ in range(workers)]
    least_loaded = [(0.0, w) for w in range(workers)]  # (expected work, worker): ties go to the lower index
    pending = [0.0] * workers  # work of round-robin units not yet folded into the heap entry
    next_empty = 0
    for unit in units:
        costs = [expected_cost(cfg, t) for t in unit]
        cost = sum(costs)
        if max(costs) <= TASK_OVERHEAD:
            w = next_empty % workers
            next_empty += 1
            pending[w] += cost
        else:
            load, w = heapq.heappop(least_loaded)
            while pending[w]:  # stale entry: fold the pending work in and look again
                load, pending[w] = load + pending[w], 0.0
                load, w = heapq.heappushpop(least_loaded, (load, w))
            heapq.heappush(least_loaded, (load + cost, w))
        queues[w].extend(unit)
    return queues
