"""The compile pipeline: ODG -> split propagation -> FillConfig -> events -> queues -> per-rank schedules."""
from __future__ import annotations

import dataclasses

import numpy as np

from .config import MoeConfig
from .events import Event, assign_events
from .fill import fill_rank
from .graphs import build_graph
from .odg import OperatorGraph, TensorSpec
from .ordering import build_queues
from .split import propagate_splits
from .ssc_format import (DTYPE_BYTES, EVENT_DTYPE, EVENT_REMOTE_TRIGGERED, MAX_INPUTS, MAX_OUTPUTS, NO_EVENT,
                         NO_SLOT, QUEUE_DTYPE, REF_DTYPE, TASK_DTYPE, TENSOR_DTYPE, TENSOR_SYMMETRIC,
                         TILING_DTYPE, Direction, QueueType, TaskType)
from .tasks import Ref, Task

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
        rec[i]["bytes"] = int(np.prod(t.shape)) * DTYPE_BYTES[t.dtype]
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
        rec[node.op_id] = (node.op_id, node.task_type, m, out.cols, k, cfg.experts_per_rank, (0, 0))
    return rec


def _ref_tuple(ref: Ref) -> tuple:
    return (ref.slot, ref.flags, ref.rank, ref.row_offset, ref.rows, ref.col_offset, ref.cols)


UNUSED_REF = (NO_SLOT, 0, 0, 0, 0, 0, 0)


def _task_records(tasks: list[Task]) -> np.ndarray:
    rows = []
    for t in tasks:
        waits = t.waits + [NO_EVENT] * (2 - len(t.waits))
        trig_events = [e for _, e in t.triggers] + [NO_EVENT] * (2 - len(t.triggers))
        trig_ranks = [r for r, _ in t.triggers] + [0] * (2 - len(t.triggers))
        inputs = [_ref_tuple(r) for r in t.inputs] + [UNUSED_REF] * (MAX_INPUTS - len(t.inputs))
        outputs = [_ref_tuple(r) for r in t.outputs] + [UNUSED_REF] * (MAX_OUTPUTS - len(t.outputs))
        rows.append((t.task_type, t.queue, waits, trig_events, trig_ranks, t.task_index, t.split_num,
                     t.split_value, t.tiling, t.op_id, t.peer, t.expert, 0, inputs, outputs))
    return np.array(rows, TASK_DTYPE) if rows else np.zeros(0, TASK_DTYPE)


def _event_records(events: list[Event]) -> np.ndarray:
    rows = [(e.threshold, EVENT_REMOTE_TRIGGERED if e.remote else 0, e.op_id, 0) for e in events]
    return np.array(rows, EVENT_DTYPE) if rows else np.zeros(0, EVENT_DTYPE)


def _queue_records(cfg: MoeConfig, tasks: list[Task]) -> tuple[np.ndarray, np.ndarray]:
    local_index = {id(t): i for i, t in enumerate(tasks)}
    queues = build_queues(cfg, tasks)
    records, entries = [], []
    for queue_type in (QueueType.CTQ, QueueType.VTQ):
        for worker, queue in enumerate(queues[queue_type]):
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

    def rank_tasks(self, rank: int) -> list[Task]:
        return [t for t in self.tasks if t.rank == rank]


def build_group_tasks(cfg: MoeConfig, direction: str) -> GroupTasks:
    graph = build_graph(cfg, direction)
    propagate_splits(graph, cfg)
    tasks: list[Task] = []
    for rank in range(cfg.ep):
        tasks.extend(fill_rank(graph, cfg, rank))
    for uid, task in enumerate(tasks):
        task.uid = uid
    events = assign_events(tasks, graph.internal_slots())
    return GroupTasks(cfg, DIRECTIONS[direction], graph, tasks, events)


def schedule_rank(group: GroupTasks, rank: int) -> RankSchedule:
    tasks = group.rank_tasks(rank)
    queues, entries = _queue_records(group.cfg, tasks)
    return RankSchedule(group.cfg, rank, group.direction, _tensor_records(group.graph), _task_records(tasks),
                        _event_records(group.events[rank]), queues, entries,
                        _tiling_records(group.graph, group.cfg))


def compile_schedules(cfg: MoeConfig, directions: list[str], ranks: list[int]) -> list[RankSchedule]:
    out = []
    for direction in directions:
        group = build_group_tasks(cfg, direction)
        out.extend(schedule_rank(group, r) for r in ranks)
    return out
