"""Operator Dependency Graph: operators, the tensors they share, and each operator's SplitSpec.

Split labels (split_dim, split_num) live on the TensorSpec objects, which producer outputs and consumer
inputs share; split propagation (split.py) writes them, FillConfig reads them.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from .config import MoeConfig
from .errors import ScheduleError
from .ssc_format import DTYPE_BYTES, DType, QueueType, Role, Slot, TaskType


@dataclasses.dataclass(eq=False)
class TensorSpec:
    slot: Slot
    shape: tuple[int, ...]
    dtype: DType
    role: Role
    symmetric: bool = False
    split_dim: int = -1  # written by split propagation
    split_num: int = 1

    @property
    def name(self) -> str:
        return self.slot.name.lower()

    @property
    def is_metadata(self) -> bool:
        """Offsets and counts: ignored by split checks (the paper's Combine needs this)."""
        return self.role == Role.ROUTING

    @property
    def rows(self) -> int:
        """Rows of the 2-D view tasks address: every dim but the last folded together."""
        n = 1
        for d in self.shape[:-1]:
            n *= d
        return n

    @property
    def cols(self) -> int:
        return self.shape[-1]

    @property
    def nbytes(self) -> int:
        n = DTYPE_BYTES[self.dtype]
        for d in self.shape:
            n *= d
        return n


@dataclasses.dataclass(frozen=True)
class SplitSpec:
    """How an operator may be tiled (Section 4.2).

    split_inputs: None for an origin of partitioning, else the (input index, dim) labels it must inherit.
    split_output_dims: per output, the dim the partition continues along, or -1.
    task_num_fn: tiles the operator generates for a config when its split requirement holds.
    """
    split_inputs: Optional[tuple[tuple[int, int], ...]]
    split_output_dims: tuple[int, ...]
    task_num_fn: Callable[[MoeConfig], int]


@dataclasses.dataclass(eq=False)
class OperatorNode:
    name: str
    task_type: TaskType
    queue: QueueType
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    split: SplitSpec
    op_id: int = -1
    task_num: int = 1  # written by split propagation

    def __post_init__(self) -> None:
        if len(self.split.split_output_dims) != len(self.outputs):
            raise ScheduleError(f"{self.name}: split_output_dims has {len(self.split.split_output_dims)} "
                                f"entries for {len(self.outputs)} outputs")
        for index, dim in self.split.split_inputs or ():
            if not 0 <= index < len(self.inputs):
                raise ScheduleError(f"{self.name}: split input index {index} out of range")
            if self.inputs[index].is_metadata:
                raise ScheduleError(f"{self.name}: metadata input {self.inputs[index].name} cannot carry a split")
            if not 0 <= dim < len(self.inputs[index].shape):
                raise ScheduleError(f"{self.name}: split dim {dim} out of range for {self.inputs[index].name}")


class OperatorGraph:
    """A DAG of OperatorNodes connected through shared TensorSpecs."""

    def __init__(self, name: str, nodes: list[OperatorNode]):
        self.name = name
        self.nodes = nodes
        for op_id, node in enumerate(nodes):
            node.op_id = op_id
        self.producer: dict[Slot, OperatorNode] = {}
        for node in nodes:
            for tensor in node.outputs:
                if tensor.slot in self.producer:
                    raise ScheduleError(f"{name}: {tensor.name} is produced by both "
                                        f"{self.producer[tensor.slot].name} and {node.name}")
                self.producer[tensor.slot] = node

    def tensors(self) -> list[TensorSpec]:
        seen: dict[Slot, TensorSpec] = {}
        for node in self.nodes:
            for tensor in node.inputs + node.outputs:
                other = seen.setdefault(tensor.slot, tensor)
                if other is not tensor:
                    raise ScheduleError(f"{self.name}: two TensorSpecs for slot {tensor.name}")
        return [seen[s] for s in sorted(seen)]

    def internal_slots(self) -> set[Slot]:
        """Slots some operator of this graph writes: their readers need producer events."""
        return set(self.producer)

    def topological_order(self) -> list[OperatorNode]:
        indegree = {id(n): 0 for n in self.nodes}
        consumers: dict[int, list[OperatorNode]] = {id(n): [] for n in self.nodes}
        for node in self.nodes:
            for tensor in node.inputs:
                producer = self.producer.get(tensor.slot)
                if producer is not None and producer is not node:
                    indegree[id(node)] += 1
                    consumers[id(producer)].append(node)
        ready = [n for n in self.nodes if indegree[id(n)] == 0]
        order: list[OperatorNode] = []
        while ready:
            node = ready.pop(0)
            order.append(node)
            for consumer in consumers[id(node)]:
                indegree[id(consumer)] -= 1
                if indegree[id(consumer)] == 0:
                    ready.append(consumer)
        if len(order) != len(self.nodes):
            stuck = sorted(n.name for n in self.nodes if indegree[id(n)] > 0)
            raise ScheduleError(f"{self.name}: operator graph has a cycle through {', '.join(stuck)}")
        return order
