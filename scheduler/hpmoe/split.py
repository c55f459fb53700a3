"""Split propagation: Algorithm 1 of the paper, line for line."""
from __future__ import annotations

from .config import MoeConfig
from .odg import OperatorGraph


def propagate_splits(graph: OperatorGraph, cfg: MoeConfig) -> dict[str, int]:
    """Set op.task_num on every operator and split labels on every tensor; return {op name: task_num}."""
    for tensor in graph.tensors():                       # lines 1-4
        tensor.split_dim = -1
        tensor.split_num = 1
    for op in graph.topological_order():                 # line 5
        s = op.split
        if s.split_inputs is None:                       # line 7
            n = s.task_num_fn(cfg)
        elif all(op.inputs[i].split_dim == d for i, d in s.split_inputs):  # line 9
            n = s.task_num_fn(cfg)
        else:
            n = 1                                        # line 12: fallback to one unsplit task
        op.task_num = n
        for j, y in enumerate(op.outputs):               # lines 15-24
            d = s.split_output_dims[j]
            if n > 1 and d >= 0:
                y.split_dim = d
                y.split_num = n
            else:
                y.split_dim = -1
                y.split_num = n
    return {op.name: op.task_num for op in graph.nodes}
