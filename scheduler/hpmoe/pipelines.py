"""Row pipelines (cfg.row_pipelines): each row tile's whole chain on one worker, for GPUs.

On a device whose every worker runs every handler (CUDA, the CPU twin), splitting the workers into a cube
role and a vector role leaves the vector role idle half the time and keeps its SMs out of the GEMMs. Here a
row tile's chain (forward: GMM1, SwiGLU, GMM2, combine put; backward: activation-gradient GMM, SwiGLU
gradient, gate-gradient GMM, combine put) is one unit dealt to one cube-queue worker, so every step after
the first finds its input made by the same worker (no wait, still in L2), and all cube workers run GEMMs.

Unit order (every worker's queue is a subsequence of it, dealt by expected work like expected_work.py):
- the chains in the CTQ order of their first op (rank-aware slot arrival order);
- the weight-gradient tiles last, in graph order: a tile reads its expert's rows of every slot, and under
  dynamic routing any tile of the bucket can hold them, so it waits on every chain of its branch. Anywhere
  earlier, a worker could hold it ahead of a chain it waits on (the validator found exactly that cycle when
  the tiles sat at ordering.interleave's cache-guided anchors).
A chain waits only on dispatch puts and on itself, and nothing waits on a gradient tile, so the order is
deadlock free; the validator proves it for each compiled group.
The dispatch puts (head) and final reductions (tail) are dealt over every worker as with mixed queues; the
vector-queue workers run those, the entry signals and the router-weight gradient tiles (they read only dy
and saved rows, so they overlap the chains there: on the cube-queue workers, ahead of the chains, they held
the first GEMMs of a DeepSeek-V3 backward at 8192 tokens back by 0.5 ms). With a claim pool
(worker_queues._pool_units) the chains (in halves), the weight-gradient tiles and the reductions are claimed
at run time instead.
"""
from __future__ import annotations

from .config import MoeConfig
from .errors import ScheduleError
from .ssc_format import TaskType
from .tasks import Task

CHAIN_TYPES = (TaskType.GMM, TaskType.SWIGLU, TaskType.GMM_TRANS_B, TaskType.SWIGLU_GRAD, TaskType.COMBINE_PUT,
               TaskType.GMM_SWIGLU, TaskType.GMM_SWIGLU_GRAD)


def _chains(cfg: MoeConfig, tasks: list[Task], ctq_order: list[Task]) -> list[list[Task]]:
    """Chain tasks grouped by the first receive row of their tile, ops in graph order, chains in the CTQ
    order (ordering.queue_order) of their first op."""
    by_row: dict[int, list[Task]] = {}
    for task in tasks:
        if task.task_type in CHAIN_TYPES:
            by_row.setdefault(task.inputs[0].row_offset, []).append(task)
    lengths = {len(chain) for chain in by_row.values()}
    if len(lengths) != 1:
        raise ScheduleError(f"row pipelines need every row-tiled op and combine put on the same {cfg.tile_m}-row "
                            f"tiles; got chains of {sorted(lengths)} tasks (a put chunk or op fell back to "
                            f"another tiling)")
    chains = [sorted(chain, key=lambda t: t.op_id) for chain in by_row.values()]
    first = {id(t): i for i, t in enumerate(ctq_order)}
    return sorted(chains, key=lambda chain: first[id(chain[0])])


def pipeline_units(cfg: MoeConfig, tasks: list[Task], ctq_order: list[Task]) -> list[list[Task]]:
    """The rank's cube-queue work as units in dealing order: chains, weight gradients."""
    late = [[t] for t in tasks if t.task_type == TaskType.GMM_WEIGHT_GRAD]
    return _chains(cfg, tasks, ctq_order) + late
