"""In-memory Task Descriptors, before serialisation: one Task per tile, one Ref per tensor region."""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

from .ssc_format import QueueType, Slot, TaskType

NO_PEER = 0xFFFFFFFF


class Ref(NamedTuple):
    """A 2-D region of a tensor slot on one rank (the TD's TDesc). A NamedTuple: tasks hold many of them."""
    slot: Slot
    rank: int
    row_offset: int
    rows: int
    col_offset: int
    cols: int
    flags: int = 0

    @property
    def row_end(self) -> int:
        return self.row_offset + self.rows


@dataclasses.dataclass(slots=True, eq=False)
class Task:
    rank: int
    op_id: int
    op_name: str
    task_type: TaskType
    queue: QueueType
    task_index: int
    split_num: int
    split_value: int
    phase: int           # sub-step of the op's FillConfig (entry < count < put, put < reduce)
    peer: int            # rank at the other end of the row slot, NO_PEER if none or several
    chunk: int           # row tile within the peer's slot (ordering key), else task_index
    expert: int
    inputs: list[Ref]
    outputs: list[Ref]
    tiling: int = 0
    waits: list[int] = dataclasses.field(default_factory=list)                   # event ids on self.rank
    triggers: list[tuple[int, int]] = dataclasses.field(default_factory=list)    # (rank, event id)
    uid: int = -1        # position in the group-wide task list

    def describe(self) -> str:
        peer = "" if self.peer == NO_PEER else f" peer={self.peer}"
        return f"rank {self.rank} {self.op_name}[{self.task_index}] ({self.task_type.name}{peer})"
