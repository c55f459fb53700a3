"""op_kernel/runtime/task_access.h and scheduler/hpmoe/task_access.py are one table; the writer follows it."""
from __future__ import annotations

import pytest

from hpmoe import task_access as A
from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config
from hpmoe.errors import ScheduleError
from hpmoe.ssc_format import Direction, Slot, TaskType
from hpmoe.tasks import Ref, Task


def test_header_and_python_tables_are_identical(layout_probe):
    probe = layout_probe
    assert probe["access.rows"] == len(A.TASK_ACCESS)
    for i, row in enumerate(A.TASK_ACCESS):
        assert probe[f"access.{i}.task_type"] == row.task_type, f"row {i}: task type"
        assert probe[f"access.{i}.flags"] == row.flags, f"row {i} ({row.task_type.name}): flags"
        for k, allowed in enumerate(row.inputs):
            assert probe[f"access.{i}.inputs.{k}"] == A.slot_mask(allowed), f"row {i} ({row.task_type.name}) input {k}"
        for k, allowed in enumerate(row.outputs):
            assert probe[f"access.{i}.outputs.{k}"] == A.slot_mask(allowed), f"row {i} ({row.task_type.name}) output {k}"


def test_every_task_type_has_a_row():
    assert {row.task_type for row in A.TASK_ACCESS} == set(TaskType)


@pytest.mark.parametrize("overrides", [{"ep": 3}, {"ep": 1}, {"ep": 4, "topk": 3, "tile_m": 16}])
def test_compiled_tasks_follow_the_table(overrides):
    """Every (type, slots) combination the compiler emits matches exactly one direction-allowed row."""
    cfg = make_config("small", overrides, None)
    for s in compile_schedules(cfg, ["fwd", "bwd"], list(range(cfg.ep))):
        for t in s.tasks:
            ins = [int(x) for x in t["inputs"]["slot"] if x != 0xFFFF]
            outs = [int(x) for x in t["outputs"]["slot"] if x != 0xFFFF]
            rows = [r for r in A.TASK_ACCESS if r.task_type == int(t["task_type"]) and A.matches(r, s.direction, ins, outs)]
            assert len(rows) == 1, (TaskType(int(t["task_type"])).name, ins, outs)


def test_writer_refuses_a_task_outside_the_table():
    ref = Ref(Slot.X, 0, 0, 4, 0, 8)  # COMBINE_REDUCE reading x where its handler indexes ret_y's rows
    bad = Task(0, 4, "Combine", TaskType.COMBINE_REDUCE, 1, 0, 1, 4, 1, 0, 0, 0,
               [ref, Ref(Slot.TOPK_WEIGHTS, 0, 0, 4, 0, 2), Ref(Slot.TOKEN_ROWS, 0, 0, 4, 0, 2)],
               [Ref(Slot.Y, 0, 0, 4, 0, 8)])
    with pytest.raises(ScheduleError, match=r"COMBINE_REDUCE.*reads \['X', 'TOPK_WEIGHTS', 'TOKEN_ROWS'\]"):
        A.check_tasks([bad], Direction.FORWARD)
