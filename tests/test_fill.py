"""FillConfig: tile boundaries of every op line up, GMMs never split K, tiles cover the full expert width."""
from __future__ import annotations

import pytest

from hpmoe.compiler import build_group_tasks
from hpmoe.config import make_config
from hpmoe.ssc_format import Slot, TaskType

CFG = make_config("small", {"ep": 3, "hidden": 48, "inter": 32})


def _ops(direction: str, rank: int = 1):
    group = build_group_tasks(CFG, direction)
    by_op: dict[str, list] = {}
    for t in group.rank_tasks(rank):
        by_op.setdefault(t.op_name, []).append(t)
    return group, by_op


def _region(ref):
    return (ref.slot, ref.rank, ref.row_offset, ref.rows)


def test_forward_tiles_align_from_dispatch_to_combine():
    group, ops = _ops("fwd")
    dispatch_out = {_region(t.outputs[0]) for t in group.tasks if t.task_type == TaskType.DISPATCH_PUT and
                    t.outputs[0].rank == 1}
    gmm1_in = {_region(t.inputs[0]) for t in ops["GMM1"]}
    assert gmm1_in == dispatch_out  # each GMM1 tile reads exactly one dispatch chunk
    chain = [("GMM1", "SwiGLU"), ("SwiGLU", "GMM2")]
    for producer, consumer in chain:
        produced = [(t.outputs[0].row_offset, t.outputs[0].rows) for t in ops[producer]]
        consumed = [(t.inputs[0].row_offset, t.inputs[0].rows) for t in ops[consumer]]
        assert produced == consumed, f"{producer} -> {consumer}"
    puts = [t for t in ops["Combine"] if t.task_type == TaskType.COMBINE_PUT]
    assert sorted((t.inputs[0].row_offset, t.inputs[0].rows) for t in puts) == \
        sorted((t.outputs[0].row_offset, t.outputs[0].rows) for t in ops["GMM2"])


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_gmm_tiles_keep_k_whole_and_cover_the_full_expert_width(direction):
    _, ops = _ops(direction)
    full_cols = {Slot.H: 2 * CFG.inter, Slot.Y_EXPERT: CFG.hidden, Slot.DA: CFG.inter, Slot.DX_EXPERT: CFG.hidden,
                 Slot.DW1: 2 * CFG.inter, Slot.DW2: CFG.hidden}
    gmm_types = (TaskType.GMM, TaskType.GMM_TRANS_B, TaskType.GMM_WEIGHT_GRAD)
    for name, tasks in ops.items():
        for t in tasks:
            if t.task_type not in gmm_types:
                continue
            out = t.outputs[0]
            assert out.col_offset == 0 and out.cols == full_cols[out.slot], f"{name}: tile splits N"
            weight_or_grad = [r for r in t.inputs if r.slot in (Slot.W1, Slot.W2, Slot.RECV_DY, Slot.DH)]
            if t.task_type == TaskType.GMM_WEIGHT_GRAD:
                # Reduction over every received row of the expert: the gradient input is read whole.
                assert weight_or_grad[0].rows == CFG.recv_rows, f"{name}: splits the reduction"
            else:
                assert t.inputs[0].col_offset == 0, f"{name}: splits K"
                whole_weight = [r for r in t.inputs if r.slot in (Slot.W1, Slot.W2)]
                assert whole_weight and whole_weight[0].row_offset == 0


def test_tasks_respect_the_wait_and_trigger_limits():
    fwd, bwd = build_group_tasks(CFG, "fwd"), build_group_tasks(CFG, "bwd")
    assert max(len(t.waits) for t in fwd.tasks) == 2     # GMM1 waits on its chunk and on the counts
    assert max(len(t.triggers) for t in bwd.tasks) == 2  # backward puts feed a tile and the weight grads
    for group in (fwd, bwd):
        assert max(len(t.waits) for t in group.tasks) <= 2 and max(len(t.triggers) for t in group.tasks) <= 2


def test_every_put_has_one_destination_and_signals_there():
    group = build_group_tasks(CFG, "bwd")
    for t in group.tasks:
        if t.task_type in (TaskType.BWD_DISPATCH_PUT, TaskType.COMBINE_PUT):
            (dst,) = {r.rank for r in t.outputs}
            assert {rank for rank, _ in t.triggers} == {dst}, t.describe()
