"""Per-worker queues of one rank: the orders of ordering.py dealt to the workers by expected work.

Mixed queues (cfg.mixed_queues), for backends whose every worker runs every handler (CPU twin, CUDA): the two
ends of a direction are vector work that the cube workers would only wait through, so both are dealt over all
workers, cube ones first. Head: the dispatch puts, right after the entry signals and count puts (which every
put waits on), so the receive slots fill at the speed of all workers, not of the vector ones. Tail: the final
top-k reductions, which cannot start before the last GMM tile's rows come back, after each worker's own queue.
Row pipelines (cfg.row_pipelines, needs mixed queues): the cube-queue workers also run every row tile's
vector steps, one whole chain per worker (pipelines.py).
Claim pool (cfg.claim_pool): the weight-gradient tiles go to one pool queue instead of the workers' queues;
the cube-queue workers claim them at run time after their own queue, larger tiles (dW2) first. A tile costs
in proportion to its expert's rows, which a static deal made for balanced routing cannot know.
"""
from __future__ import annotations

from .config import MoeConfig
from .expected_work import deal_by_expected_work, deal_units
from .ordering import queue_order
from .pipelines import CHAIN_TYPES, EARLY_TYPES, pipeline_units
from .ssc_format import QueueType, TaskType
from .tasks import Task

HEAD_TYPES = (TaskType.DISPATCH_PUT, TaskType.BWD_DISPATCH_PUT)
TAIL_TYPES = (TaskType.COMBINE_REDUCE, TaskType.BWD_COMBINE_REDUCE)
SETUP_TYPES = (TaskType.ENTRY_SIGNAL, TaskType.COUNT_PUT)  # every put waits on them: never behind a put
POOL_TYPES = (TaskType.GMM_WEIGHT_GRAD,)  # claim_pool: nothing waits on them (they trigger no event)


def build_queues(cfg: MoeConfig, tasks: list[Task]) -> dict[QueueType, list[list[Task]]]:
    """Per-worker queues of one rank, keyed by queue type (round-robin puts whole runs of expected-empty
    tiles on the same workers when the tiles per slot and the worker count share a factor)."""
    orders = {queue_type: queue_order(cfg, tasks, queue_type) for queue_type in (QueueType.CTQ, QueueType.VTQ)}
    head: list[Task] = []
    tail: list[Task] = []
    if cfg.mixed_queues:
        vtq = orders[QueueType.VTQ]
        head = [t for t in vtq if t.task_type in HEAD_TYPES]
        tail = [t for t in vtq if t.task_type in TAIL_TYPES]
        moved = HEAD_TYPES + TAIL_TYPES + (CHAIN_TYPES + EARLY_TYPES if cfg.row_pipelines else ())
        orders[QueueType.VTQ] = [t for t in vtq if t.task_type not in moved]
    pool = sorted((t for t in tasks if t.task_type in POOL_TYPES), key=lambda t: (t.op_id, t.task_index)) \
        if cfg.claim_pool else []
    if cfg.row_pipelines:
        units = [u for u in pipeline_units(cfg, tasks) if u[0].task_type not in POOL_TYPES or not pool]
        ctq = deal_units(cfg, units, cfg.num_aic)
    else:
        ctq = deal_by_expected_work(cfg, [t for t in orders[QueueType.CTQ] if t.task_type not in POOL_TYPES or not pool],
                                    cfg.num_aic)
    queues = {QueueType.CTQ: ctq, QueueType.VTQ: deal_by_expected_work(cfg, orders[QueueType.VTQ], cfg.num_aiv)}
    everyone = queues[QueueType.CTQ] + queues[QueueType.VTQ]
    if head:
        for queue, share in zip(everyone, deal_by_expected_work(cfg, head, len(everyone))):
            setup = next((i for i, t in enumerate(queue) if t.task_type not in SETUP_TYPES), len(queue))
            queue[setup:setup] = share
    for i, task in enumerate(tail):  # last in every queue: nothing a worker runs earlier can wait on them
        everyone[i % len(everyone)].append(task)
    if cfg.claim_pool:
        queues[QueueType.POOL] = [pool]
    return queues
