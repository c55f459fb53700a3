"""Queue orders (Section 4.5) and the assignment of each queue to workers.

Every order here is a legal topological order: tasks are sorted first by operator position (operators are in
topological order), and reordering only moves tasks that do not depend on each other:
- operator order (baseline): by operator, then FillConfig phase, then tile index;
- rank-aware task reordering (RATR): a rank's puts start at its own rank and walk the ring (d = r, r+1, ...),
  so at each step every rank receives from exactly one source; tiles of a receive slot are processed in the
  order the slots arrive (slot s arrives at step (r - s) mod ep);
- cache-guided GMM interleaving (backward CTQ): each weight-gradient tile of expert e is placed right after the
  row tile of the same branch that, under balanced routing, holds the last rows of expert e in the
  last-arriving slot, so the expert's gradient rows are re-read while still cached.
- independent vector ops early: an op that reads only inputs and saved tensors (the router-weight gradient) is
  placed right after the op named in PLACE_AFTER, where vector workers would otherwise wait for the
  activation-gradient tiles, instead of at the end where it lengthens the tail after the last GMM;
Each order is dealt to the workers by expected work (worker_queues.py); every worker's queue is a subsequence
of it. The validator (validate.py) proves acyclicity of the result across the whole EP group.
"""
from __future__ import annotations

import math

from .config import MoeConfig
from .ssc_format import QueueType, TaskType
from .tasks import NO_PEER, Task

# Weight-gradient op -> the row-tiled op of the same backward branch it is interleaved with.
INTERLEAVE_PARTNER = {"GMM_w2_grad": "GMM_act_grad", "GMM_w1_grad": "GMM_gate_grad"}

# Ops with no producer inside their direction -> the op they follow in queue order (any place is legal).
PLACE_AFTER = {"TopkWeightGrad": "SwiGLU_grad"}


def ring_step(cfg: MoeConfig, rank: int, task: Task) -> int:
    """Position of the task's peer in this rank's communication order."""
    if task.peer == NO_PEER:
        return 0
    if task.task_type in (TaskType.ENTRY_SIGNAL, TaskType.COUNT_PUT, TaskType.DISPATCH_PUT,
                          TaskType.BWD_DISPATCH_PUT):
        return (task.peer - rank) % cfg.ep if cfg.ratr else task.peer      # destination ring
    return (rank - task.peer) % cfg.ep if cfg.ratr else task.peer          # arrival order of a slot


def op_position(task: Task, op_ids: dict[str, int]) -> float:
    after = PLACE_AFTER.get(task.op_name)
    return op_ids[after] + 0.5 if after in op_ids else task.op_id


def order_key(cfg: MoeConfig, task: Task, op_ids: dict[str, int]) -> tuple:
    return (op_position(task, op_ids), task.phase, ring_step(cfg, task.rank, task), task.chunk, task.task_index)


def _expected_last_chunk(cfg: MoeConfig, expert: int) -> int:
    """Chunk of a receive slot that holds the last rows of `expert` when routing is balanced."""
    per_expert = cfg.tokens * cfg.topk / (cfg.ep * cfg.experts_per_rank)
    rows_per_chunk = cfg.recv_rows_per_src // cfg.chunks_per_src
    last_row = max(0, math.ceil((expert + 1) * per_expert) - 1)
    return min(cfg.chunks_per_src - 1, last_row // rows_per_chunk)


def interleave(cfg: MoeConfig, ordered: list[Task]) -> list[Task]:
    """Move weight-gradient tiles next to their partner's row tile (see module doc)."""
    moved = [t for t in ordered if t.op_name in INTERLEAVE_PARTNER]
    if not moved:
        return ordered
    # Per partner op: its row tiles of the last-arriving slot, in queue order.
    tails: dict[str, list[Task]] = {}
    for name in INTERLEAVE_PARTNER.values():
        rows = [t for t in ordered if t.op_name == name]
        if not rows:
            return ordered
        steps = [ring_step(cfg, t.rank, t) for t in rows]
        last = max(steps)
        tails[name] = [t for t, step in zip(rows, steps) if step == last]
    after: dict[int, list[Task]] = {}
    for wgrad in moved:
        tail = tails[INTERLEAVE_PARTNER[wgrad.op_name]]
        chunk = _expected_last_chunk(cfg, wgrad.expert)
        anchor = next((t for t in tail if t.chunk >= chunk), tail[-1])
        after.setdefault(id(anchor), []).append(wgrad)
    moved_ids = {id(t) for t in moved}
    result: list[Task] = []
    for task in ordered:
        if id(task) in moved_ids:
            continue
        result.append(task)
        result.extend(after.get(id(task), []))
    return result


def queue_order(cfg: MoeConfig, tasks: list[Task], queue_type: QueueType) -> list[Task]:
    """The one order a rank's queue type is dealt from: sorted by order_key, then interleaved (CTQ)."""
    op_ids = {t.op_name: t.op_id for t in tasks}
    ordered = sorted((t for t in tasks if t.queue == queue_type), key=lambda t: order_key(cfg, t, op_ids))
    if queue_type == QueueType.CTQ and cfg.interleave:
        ordered = interleave(cfg, ordered)
    return ordered
