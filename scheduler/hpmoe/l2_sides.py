"""Experiment (HPMOE_EXPERIMENT_SIDE_ORDER=1): the claim pool in an order for the two halves of the GPU's L2.

An H100/H200's L2 is two partitions joined by a fabric; a line lives in its home partition, and an SM of the
other half that reads it gets it over the fabric and keeps a copy in its own half (measured:
benchmarks/cuda_l2_sides_probe.cu; docs/cuda.md, "The two halves of L2"). A weight panel that the SMs of both
halves read is held twice and crosses the fabric; read by one half only, half its lines do. The CUDA build
with -DHPMOE_L2_SIDES=1 has the SMs of half s claim the pool positions u with u % 2 == s (two claim counters,
each half taking the other's positions once its own run out). This order puts every unit that reads one
weight panel on positions of one parity: the panels alternate between the halves in pool order, the other
units (SwiGLU, puts, reductions) go to whichever half has fewer, and the two lists are interleaved one to one.
A unit moves at most the length of one panel's run of units from its place in the plain order; the order is
kept only if every unit still comes after every pool unit whose events it waits on.
"""
from __future__ import annotations

import os

from .ssc_format import TaskType
from .tasks import Task

GMM_TYPES = (TaskType.GMM, TaskType.GMM_TRANS_B, TaskType.GMM_WEIGHT_GRAD, TaskType.GMM_SWIGLU,
             TaskType.GMM_SWIGLU_GRAD)


def enabled() -> bool:
    return os.environ.get("HPMOE_EXPERIMENT_SIDE_ORDER", "") == "1"


def _panel(unit: list[Task], row_group):
    """The weight panel a unit reads (None: not a GMM unit). A weight-gradient unit shares its dY / dH
    column block with the expert's other slabs; a row tile's GMM shares W[e]'s column panel with the row tiles
    one expert is expected to fill (worker_queues._panel_order's groups)."""
    t = unit[0]
    if t.task_type not in GMM_TYPES:
        return None
    out = t.outputs[0]
    if t.task_type == TaskType.GMM_WEIGHT_GRAD:
        return (t.op_id, t.expert, out.col_offset)
    return (t.op_id, out.slot, row_group(out.row_offset), out.col_offset)


def _waits_after_producers(units: list[list[Task]]) -> bool:
    """Every unit comes after every pool unit that triggers an event it waits on."""
    last: dict[tuple[int, int], tuple[int, int]] = {}  # (rank, event) -> (unit, task) of its last pool trigger
    for pos, unit in enumerate(units):
        for i, t in enumerate(unit):
            for trig in t.triggers:
                last[trig] = (pos, i)
    for pos, unit in enumerate(units):
        for i, t in enumerate(unit):
            if any(last.get((t.rank, e), (-1, 0)) >= (pos, i) for e in t.waits):
                return False
    return True


def side_order(units: list[list[Task]], row_group) -> list[list[Task]]:
    """The pool's units interleaved for the two halves (module doc); the plain order where that would put a
    unit before a producer. row_group(row_offset): the panel-sharing group of a row tile's GMM."""
    sides: tuple[list, list] = ([], [])
    side_of: dict = {}
    for unit in units:
        key = _panel(unit, row_group)
        if key is None:
            side = 0 if len(sides[0]) <= len(sides[1]) else 1
        else:
            side = side_of.setdefault(key, len(side_of) % 2)
        sides[side].append(unit)
    merged: list[list[Task]] = []
    for a, b in zip(*sides):
        merged += [a, b]
    longer = sides[0] if len(sides[0]) > len(sides[1]) else sides[1]
    merged += longer[min(len(sides[0]), len(sides[1])):]
    return merged if _waits_after_producers(merged) else units
