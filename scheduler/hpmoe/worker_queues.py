"""Per-worker queues of one rank: the orders of ordering.py dealt to the workers by expected work.

Mixed queues (cfg.mixed_queues), for backends whose every worker runs every handler (CPU twin, CUDA): the two
ends of a direction are vector work that the cube workers would only wait through, so both are dealt over all
workers, cube ones first. Head: the dispatch puts, right after the entry signals and count puts (which every
put waits on), so the receive slots fill at the speed of all workers, not of the vector ones. Tail: the final
top-k reductions, which cannot start before the last GMM tile's rows come back, after each worker's own queue
(or last in the pool, when it holds units).
Row pipelines (cfg.row_pipelines, needs mixed queues): the cube-queue workers also run every row tile's
vector steps, one whole chain per worker (pipelines.py).
Claim pool (cfg.claim_pool): work whose cost follows the routing leaves the workers' queues for pool units,
which workers claim at run time, in order, after their own queue: the weight-gradient tiles (a tile costs in
proportion to its expert's rows, which a deal made for balanced routing cannot know), with row pipelines
every chain, with mixed queues alone every row tile's second GMM and combine puts (with cfg.first_gmm_pool, its
first GMM and SwiGLU step before them: _first_stage), and whenever a pool
holds units, the final reductions (see _pool_units). The cube-queue workers claim; with mixed queues and no
row pipelines the vector-queue workers too, once their own queue is done (MoeConfig.pool_claimers; nothing
in their queues waits on a pool unit, which the validator's deadlock check proves).
"""
from __future__ import annotations

from .config import MoeConfig
from .expected_work import balanced_rows_per_pair, deal_by_expected_work, deal_units
from .ordering import queue_order
from .pipelines import CHAIN_TYPES, pipeline_units
from .ssc_format import QueueType, TaskType
from .tasks import Task

HEAD_TYPES = (TaskType.DISPATCH_PUT, TaskType.BWD_DISPATCH_PUT)
TAIL_TYPES = (TaskType.COMBINE_REDUCE, TaskType.BWD_COMBINE_REDUCE)
SETUP_TYPES = (TaskType.ENTRY_SIGNAL, TaskType.COUNT_PUT)  # every put waits on them: never behind a put


ACT_ENDS = (TaskType.SWIGLU, TaskType.SWIGLU_GRAD, TaskType.GMM_SWIGLU, TaskType.GMM_SWIGLU_GRAD)


def _first_half(chain: list[Task]) -> int:
    """Tasks of a chain's first half: its GMM and the SwiGLU (or its gradient), every column block of each; with
    fused SwiGLU the fused tasks."""
    return max(i for i, t in enumerate(chain) if t.task_type in ACT_ENDS) + 1


SECOND_GMM_OPS = ("GMM2", "GMM_gate_grad")  # the row tile's GMM after its SwiGLU (gradient)
# A combine put is claimed this many row tiles' GMMs after its own row tile's last. At the Mixtrals that is
# 32-48 units, which 132 blocks claim at once, so each put waits out a GMM tile: the combine's waits are 3.4-4.2%
# of the forward's block cycles (profile build's wait profile, one H200, 4096 tokens). Nine row tiles (144-216
# units) cut those waits to 1.8-2.4%, and the backward's 0.8-1.0% to 0.1-0.2%, but the kernels were no faster
# with puts a claimer wave (132 units) later: fwd+bwd ms, three rounds alternating, two tiles / wave:
# Mixtral-8x22B 29.05 / 29.13, Mixtral-8x7B 16.73 / 16.92, DBRX 36.82 / 37.18 (session 19,
# benchmarks/RESULTS.md). Blocks a put no longer holds mid-launch wait at its end instead. Not kept.
PUT_LAG_ROW_TILES = 2


def _panel_order(cfg: MoeConfig, gmms: list[Task]) -> list[Task]:
    """The second GMMs in groups of the row tiles one expert is expected to fill (balanced routing), column
    block major inside a group: the row tiles that read one column panel of W2[e] / W1[e] are claimed one
    after another, so they run together and share it in L2. In row-tile order, a panel's readers were one row
    tile's column blocks apart and L2 held it for none of them (Mixtral-8x7B's backward read 18.4 GB in this
    phase against 3.4 compulsory; docs/cuda.md, "Per phase and per tile")."""
    C, tile = cfg.recv_rows_per_src, cfg.tile_m
    group = max(1, round(balanced_rows_per_pair(cfg) / cfg.experts_per_rank / tile))

    def key(item: tuple[int, Task]):
        i, t = item
        slot, row = divmod(t.outputs[0].row_offset, C)
        return (slot, row // tile // group, t.outputs[0].col_offset, row, i)

    return [t for _, t in sorted(enumerate(gmms), key=key)]


def _second_stage(cfg: MoeConfig, ctq_order: list[Task], vtq_order: list[Task]) -> list[list[Task]]:
    """Without row pipelines: each row tile's second GMM (every column block a unit) in CTQ order, its combine
    puts among them. Dealt statically, these waited on their tile's SwiGLU (gradient) in whichever queue held
    them: in a Mixtral-8x7B forward (4096 tokens) the last tiles' GMM2 tasks started 0.8 ms after their SwiGLU
    while most blocks had been idle since 5.1-5.7 ms of a 7 ms forward. A put comes PUT_LAG_ROW_TILES tiles
    after its rows' last GMM, so it is claimed when they are likely done rather than waited through."""
    gmms = _panel_order(cfg, [t for t in ctq_order if t.op_name in SECOND_GMM_OPS])
    if not gmms:
        return []
    last_at: dict[tuple[int, int], int] = {}  # (slot, tile row) -> position of the tile's last GMM unit
    per_tile: dict[tuple[int, int], int] = {}
    for i, t in enumerate(gmms):
        key = (t.outputs[0].slot, t.outputs[0].row_offset)
        last_at[key] = i
        per_tile[key] = per_tile.get(key, 0) + 1
    lag = PUT_LAG_ROW_TILES * max(per_tile.values())
    after: dict[int, list[Task]] = {}
    for put in (t for t in vtq_order if t.task_type == TaskType.COMBINE_PUT):
        rows = put.inputs[0]
        first = rows.row_offset - rows.row_offset % cfg.tile_m
        tiles = [last_at.get((rows.slot, r), -1) for r in range(first, rows.row_offset + rows.rows, cfg.tile_m)]
        after.setdefault(min(max(tiles) + lag, len(gmms) - 1), []).append(put)
    units: list[list[Task]] = []
    for i, t in enumerate(gmms):
        units.append([t])
        units.extend([p] for p in after.get(i, []))
    return units


FIRST_GMM_OPS = ("GMM1", "GMM1_SwiGLU", "GMM_act_grad", "GMM_act_grad_SwiGLU")  # a row tile's GMM before its SwiGLU
ACT_TYPES = (TaskType.SWIGLU, TaskType.SWIGLU_GRAD)


def _first_stage(cfg: MoeConfig, ctq_order: list[Task], vtq_order: list[Task]) -> list[list[Task]]:
    """With cfg.first_gmm_pool: each row tile's first GMM (every column block a unit) in panel order, each
    SwiGLU (gradient) task a unit `pool_claimers` units after the last unit it waits on, when that unit is
    likely done (units about as long: a unit ends about when as many others have been claimed). Dealt
    statically, a first GMM task of many tiles ran on whichever worker the deal gave it; workers drift apart
    over such tasks, and the row tiles that read one weight panel stopped reading it together: Mixtral-8x22B's
    forward read 33.7 GB from DRAM against about 6 compulsory, L2 hit rate 46% (ncu, session 12). Claimed in
    panel order, the units that share a panel start within a few claims of each other."""
    gmms = _panel_order(cfg, [t for t in ctq_order if t.op_name in FIRST_GMM_OPS])
    if not gmms:
        return []
    last_writer: dict[int, int] = {}  # event id on this rank -> position of the last GMM unit triggering it
    for i, t in enumerate(gmms):
        for rank, event in t.triggers:
            if rank == t.rank:
                last_writer[event] = i
    after: dict[int, list[Task]] = {}
    for act in (t for t in vtq_order if t.task_type in ACT_TYPES):
        producers = [last_writer[e] for e in act.waits if e in last_writer]
        at = min(max(producers) + cfg.pool_claimers, len(gmms) - 1) if producers else len(gmms) - 1
        after.setdefault(at, []).append(act)
    units: list[list[Task]] = []
    for i, t in enumerate(gmms):
        units.append([t])
        units.extend([a] for a in after.get(i, []))
    return units


def _pool_units(cfg: MoeConfig, tasks: list[Task], units: list[list[Task]], ctq_order: list[Task],
                vtq_order: list[Task]) -> list[list[Task]]:
    """What the claim pool holds, in claim order. Each weight-gradient tile alone, the largest first (same K,
    the expert's rows; a tile's cost follows its output area): the last wave then holds the short ones
    (Mixtral-8x7B experts: dW1 tiles of 112 output tiles each had come last, behind dW2's of 16, and left the
    backward's last 2.5 ms to about a quarter of the blocks). Before them, with row pipelines, every chain's
    first half (GMM, SwiGLU) in CTQ order, then every second half (GMM, combine put); with mixed queues
    alone, every row tile's second GMM and its combine puts (_second_stage). A pool with units ends with the
    final reductions: they wait on the combine puts, so in a claimer's own queue they would hold it there
    (in a vector-queue worker's, away from the pool) until the last one. Half chains halve the last wave's
    granularity; a second half is claimed only after every first half, so it never waits on one still
    running. `units`: the pipeline units (pipelines.pipeline_units); the CTQ and VTQ orders."""
    wgrad = [[t] for t in sorted((t for t in tasks if t.task_type == TaskType.GMM_WEIGHT_GRAD),
                                 key=lambda t: (-t.outputs[0].rows * t.outputs[0].cols, t.op_id, t.expert,
                                                t.outputs[0].col_offset, t.outputs[0].row_offset))]
    first: list[list[Task]] = []
    if cfg.row_pipelines:
        chains = [u for u in units if u[0].task_type in CHAIN_TYPES]
        first = [c[:_first_half(c)] for c in chains] + [c[_first_half(c):] for c in chains]
    elif cfg.mixed_queues:
        first = (_first_stage(cfg, ctq_order, vtq_order) if cfg.first_gmm_pool else []) + \
            _second_stage(cfg, ctq_order, vtq_order)
    if not first and not wgrad:
        return []
    reduces = [[t] for t in vtq_order if t.task_type in TAIL_TYPES] if cfg.mixed_queues else []
    return first + wgrad + reduces


def _deal_head(cfg: MoeConfig, head: list[Task], workers: int) -> list[list[Task]]:
    """The dispatch puts of every worker, local ones first. Without a claim pool every worker takes a share
    of all puts. With one, the puts to other ranks go only to the last quarter of the workers (the vector
    ones first): they are bound by the links, which about that many blocks already fill (13 GB/s per block
    measured with 20, NVLink about 450 GB/s a direction), while the other workers start on the local slot's
    pool units at once; the pool evens out who did more puts."""
    local = [t for t in head if t.peer == t.rank]
    remote = [t for t in head if t.peer != t.rank]
    if not cfg.claim_pool or not remote:
        return deal_by_expected_work(cfg, local + remote, workers)
    shares = deal_by_expected_work(cfg, local, workers)
    senders = max(cfg.num_aiv, -(-workers // 4))
    for queue, extra in zip(shares[workers - senders:], deal_by_expected_work(cfg, remote, senders)):
        queue.extend(extra)
    return shares


def build_queues(cfg: MoeConfig, tasks: list[Task]) -> dict[QueueType, list[list[Task]]]:
    """Per-worker queues of one rank, keyed by queue type (round-robin puts whole runs of expected-empty
    tiles on the same workers when the tiles per slot and the worker count share a factor); under POOL, the
    pool's units in claim order."""
    orders = {queue_type: queue_order(cfg, tasks, queue_type) for queue_type in (QueueType.CTQ, QueueType.VTQ)}
    units = pipeline_units(cfg, tasks, orders[QueueType.CTQ]) if cfg.row_pipelines else []
    pool = _pool_units(cfg, tasks, units, orders[QueueType.CTQ], orders[QueueType.VTQ]) if cfg.claim_pool else []
    pooled = {id(t) for unit in pool for t in unit}
    if pooled:
        orders = {queue_type: [t for t in order if id(t) not in pooled] for queue_type, order in orders.items()}
    head: list[Task] = []
    tail: list[Task] = []
    if cfg.mixed_queues:
        vtq = orders[QueueType.VTQ]
        head = [t for t in vtq if t.task_type in HEAD_TYPES]
        tail = [t for t in vtq if t.task_type in TAIL_TYPES]
        moved = HEAD_TYPES + TAIL_TYPES + (CHAIN_TYPES if cfg.row_pipelines else ())
        orders[QueueType.VTQ] = [t for t in vtq if t.task_type not in moved]
    if cfg.row_pipelines:
        ctq = deal_units(cfg, [u for u in units if id(u[0]) not in pooled], cfg.num_aic)
    else:
        ctq = deal_by_expected_work(cfg, orders[QueueType.CTQ], cfg.num_aic)
    queues = {QueueType.CTQ: ctq, QueueType.VTQ: deal_by_expected_work(cfg, orders[QueueType.VTQ], cfg.num_aiv)}
    everyone = queues[QueueType.CTQ] + queues[QueueType.VTQ]
    for queue, share in zip(everyone, _deal_head(cfg, head, len(everyone))):
        setup = next((i for i, t in enumerate(queue) if t.task_type not in SETUP_TYPES), len(queue))
        queue[setup:setup] = share
    # Last in every queue: nothing a worker runs earlier can wait on them. (A pool with units holds them
    # instead, _pool_units.)
    for i, task in enumerate(tail):
        everyone[i % len(everyone)].append(task)
    if cfg.claim_pool:
        queues[QueueType.POOL] = pool
    return queues
