"""The compile pipeline: ODG -> split propagation -> FillConfig -> events -> queues -> per-rank schedules."""
from __future__ import annotations

import dataclasses

import numpy as np

from .act_split import act_blocks, fused_blocks
from .config import MoeConfig
from .errors import ScheduleError
from .events import Event, assign_events
from .fill import ACT_TYPES, FUSED_TYPES, GMM_TYPES, fill_rank
from .gmm_split import col_blocks
from .wgrad_split import wgrad_col_blocks
from .graphs import build_graph
from .odg import OperatorGraph
from .split import propagate_splits
from .ssc_format import (EVENT_DTYPE, EVENT_REMOTE_TRIGGERED, MAX_INPUTS, MAX_OUTPUTS, MAX_TRIGGERS,
                         MAX_WAITS, NO_EVENT, NO_SLOT, QUEUE_DTYPE, TASK_DTYPE, TENSOR_DTYPE, TENSOR_SYMMETRIC,
                         TILING_DTYPE, Direction, QueueType, TaskType)
from .task_access import check_tasks
from .tasks import Ref, Task
from .worker_queues import build_queues

DIRECTIONS = {"fwd": Direction.FORWARD, "bwd": Direction.BACKWARD}


@dataclasses.dataclass
class RankSchedule:
    """Everything one SSC file holds, as numpy record arrays (the writer dumps them as they are)."""
    cfg: MoeConfig
    rank: int
    direction: Direction
    tensors: np.ndarray
    tasks: np.ndarray
    events: np.ndarray
    queues: np.ndarray
    entries: np.ndarray
    tilings: np.ndarray

    @property
    def direction_name(self) -> str:
        return "fwd" if self.direction == Direction.FORWARD else "bwd"

    @property
    def counters_needed(self) -> int:
        """Counters a backend reserves for this file: one per event, plus the pool's claim counter."""
        return len(self.events) + (1 if self.cfg.claim_pool else 0)

    def queue_tasks(self, queue_index: int) -> np.ndarray:
        q = self.queues[queue_index]
        return self.entries[q["first_entry"]:q["first_entry"] + q["count"]]


def _tensor_records(graph: OperatorGraph) -> np.ndarray:
    tensors = graph.tensors()
    rec = np.zeros(len(tensors), TENSOR_DTYPE)
    for i, t in enumerate(tensors):
        rec[i]["slot"], rec[i]["role"], rec[i]["dtype"] = t.slot, t.role, t.dtype
        rec[i]["flags"] = TENSOR_SYMMETRIC if t.symmetric else 0
        rec[i]["ndim"] = len(t.shape)
        rec[i]["dims"][:len(t.shape)] = t.shape
        rec[i]["bytes"] = t.nbytes
        rec[i]["name"] = t.name.encode()
    return rec


def _tiling_records(graph: OperatorGraph, cfg: MoeConfig) -> np.ndarray:
    rec = np.zeros(len(graph.nodes), TILING_DTYPE)
    for node in graph.nodes:
        out = node.outputs[-1]
        k = node.inputs[0].cols
        if node.task_type == TaskType.GMM_WEIGHT_GRAD:
            m, k = cfg.wgrad_tile, cfg.recv_rows
        elif node.task_type == TaskType.TOPK_WEIGHT_GRAD:
            m = cfg.token_tile
        else:
            m = cfg.recv_rows // node.task_num
        if node.task_type == TaskType.GMM_WEIGHT_GRAD:
            n = wgrad_col_blocks(cfg, out.cols)[0][1]
        elif node.task_type in GMM_TYPES:
            n = col_blocks(cfg, out.cols, k)[0][1]
        elif node.task_type in FUSED_TYPES:  # GEMM output columns per task: H's gate and up, dA
            n = fused_blocks(cfg, node.task_type)[0][1] * (2 if node.task_type == TaskType.GMM_SWIGLU else 1)
        elif node.task_type in ACT_TYPES:  # output columns per task: the block of A, of dH's gate and up
            n = act_blocks(cfg)[0][1] * out.cols // cfg.inter
        else:
            n = out.cols
        rec[node.op_id] = (node.op_id, node.task_type, m, n, k, cfg.experts_per_rank, (0, 0))
    return rec


UNUSED_REF = tuple(Ref(NO_SLOT, 0, 0, 0, 0, 0, 0))


def _task_records(tasks: list[Task]) -> np.ndarray:
    """Columnar fill: one numpy assignment per field instead of one tuple per task."""
    rec = np.zeros(len(tasks), TASK_DTYPE)
    if not tasks:
        return rec
    scalar = {
        "task_type": [t.task_type for t in tasks], "queue_type": [t.queue for t in tasks],
        "task_index": [t.task_index for t in tasks], "task_split_num": [t.split_num for t in tasks],
        "task_split_value": [t.split_value for t in tasks], "tiling_data_position": [t.tiling for t in tasks],
        "op_id": [t.op_id for t in tasks], "peer": [t.peer for t in tasks], "expert": [t.expert for t in tasks],
    }
    for name, values in scalar.items():
        rec[name] = values
    rec["dependent_event"] = [t.waits + [NO_EVENT] * (MAX_WAITS - len(t.waits)) for t in tasks]
    rec["trigger_event"] = [[e for _, e in t.triggers] + [NO_EVENT] * (MAX_TRIGGERS - len(t.triggers)) for t in tasks]
    rec["trigger_rank"] = [[r for r, _ in t.triggers] + [0] * (MAX_TRIGGERS - len(t.triggers)) for t in tasks]
    for field, width in (("inputs", MAX_INPUTS), ("outputs", MAX_OUTPUTS)):
        flat: list[int] = []
        extend = flat.extend
        for t in tasks:
            refs = getattr(t, field)
            for ref in refs:
                extend(ref)
            extend(UNUSED_REF * (width - len(refs)))
        table = np.array(flat, np.int64).reshape(len(tasks), width, len(Ref._fields))
        for column, name in enumerate(Ref._fields):
            rec[field][name] = table[:, :, column]
    return rec


def _event_records(events: list[Event]) -> np.ndarray:
    rows = [(e.threshold, EVENT_REMOTE_TRIGGERED if e.remote else 0, e.op_id, 0) for e in events]
    return np.array(rows, EVENT_DTYPE) if rows else np.zeros(0, EVENT_DTYPE)


def _queue_records(cfg: MoeConfig, tasks: list[Task]) -> tuple[np.ndarray, np.ndarray]:
    local_index = {id(t): i for i, t in enumerate(tasks)}
    queues = build_queues(cfg, tasks)
    records, entries = [], []
    for queue_type in (QueueType.CTQ, QueueType.VTQ, QueueType.POOL):
        for worker, queue in enumerate(queues.get(queue_type, [])):
            records.append((queue_type, worker, len(entries), len(queue)))
            entries.extend(local_index[id(t)] for t in queue)
    return np.array(records, QUEUE_DTYPE), np.array(entries, np.dtype("<u4"))


@dataclasses.dataclass
class GroupTasks:
    """The task graph of a whole EP group for one direction, before it is split into files."""
    cfg: MoeConfig
    direction: Direction
    graph: OperatorGraph
    tasks: list[Task]
    events: dict[int, list[Event]]
    by_rank: dict[int, list[Task]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for task in self.tasks:
            self.by_rank.setdefault(task.rank, []).append(task)

    def rank_tasks(self, rank: int) -> list[Task]:
        return self.by_rank.get(rank, [])


def build_group_tasks(cfg: MoeConfig, direction: str, ranks: list[int] | None = None,
                      graph: OperatorGraph | None = None) -> GroupTasks:
    """Tasks and events of the group. With `ranks`, only those ranks are scheduled (see _mirror_triggers).
    `graph` replaces the standard MoE-FFN graph of the direction (tests use altered SplitSpecs)."""
    graph = graph or build_graph(cfg, direction)
    propagate_splits(graph, cfg)
    wanted = frozenset(range(cfg.ep) if ranks is None else ranks)
    whole_group = len(wanted) == cfg.ep
    tasks: list[Task] = []
    for rank in range(cfg.ep):
        tasks.extend(fill_rank(graph, cfg, rank, None if whole_group or rank in wanted else wanted))
    for uid, task in enumerate(tasks):
        task.uid = uid
    events = assign_events(tasks, graph.internal_slots(), sorted(wanted))
    if not whole_group:
        _mirror_triggers([t for t in tasks if t.rank in wanted], wanted)
    return GroupTasks(cfg, DIRECTIONS[direction], graph, tasks, events)


def _mirror_triggers(tasks: list[Task], wanted: frozenset[int]) -> None:
    """Triggers of puts into ranks that are not being compiled, by rank symmetry.

    Every rank runs the same graph and numbers its events in the same order, so the event a put (r -> d,
    chunk c) triggers on d has the id of the event r's own put (r -> r, chunk c) triggers on r. The tests
    check single-rank compiles byte for byte against whole-group compiles, which derive every trigger.
    """
    self_puts = {(t.rank, t.op_id, t.phase, t.chunk): t for t in tasks if t.peer == t.rank}
    for task in tasks:
        remote = {ref.rank for ref in task.outputs} - wanted
        if not remote:
            continue
        (dst,) = remote
        mirror = self_puts.get((task.rank, task.op_id, task.phase, task.chunk))
        if mirror is None or mirror.task_type != task.task_type:
            raise ScheduleError(f"{task.describe()}: no self-put to mirror; compile all ranks (--all-ranks)")
        task.triggers = [(dst, event) for _, event in mirror.triggers]


def schedule_rank(group: GroupTasks, rank: int) -> RankSchedule:
    tasks = group.rank_tasks(rank)
    # The writer follows the handlers' access table (task_access.py).
    check_tasks(tasks, group.direction, group.cfg.weights_transposed, group.cfg.fuse_swiglu)
    queues, entries = _queue_records(group.cfg, tasks)
    return RankSchedule(group.cfg, rank, group.direction, _tensor_records(group.graph), _task_records(tasks),
                        _event_records(group.events[rank]), queues, entries,
                        _tiling_records(group.graph, group.cfg))


def compile_schedules(cfg: MoeConfig, directions: list[str], ranks: list[int]) -> list[RankSchedule]:
    out = []
    for direction in directions:
        group = build_group_tasks(cfg, direction, ranks)
        out.extend(schedule_rank(group, r) for r in ranks)
    return out
