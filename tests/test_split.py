"""Algorithm 1 (split propagation) on the MoE-FFN graphs, including the fallback to one unsplit task."""
from __future__ import annotations

import dataclasses

import pytest

from hpmoe.compiler import build_group_tasks, schedule_rank
from hpmoe.config import make_config
from hpmoe.errors import ScheduleError
from hpmoe.graphs import build_backward_graph, build_forward_graph, tensor_specs
from hpmoe.odg import OperatorGraph, OperatorNode, SplitSpec
from hpmoe.split import propagate_splits
from hpmoe.ssc_format import QueueType, Slot, TaskType
from hpmoe.validate import validate

CFG = make_config("small", {"ep": 3})


def test_forward_graph_has_the_five_nodes_and_row_split_propagates():
    g = build_forward_graph(CFG)
    counts = propagate_splits(g, CFG)
    assert list(counts) == ["Dispatch", "GMM1", "SwiGLU", "GMM2", "Combine"]
    assert set(counts.values()) == {CFG.row_tiles}
    by_slot = {t.slot: t for t in g.tensors()}
    for slot in (Slot.RECV_X, Slot.H, Slot.A, Slot.Y_EXPERT, Slot.RET_Y):
        assert (by_slot[slot].split_dim, by_slot[slot].split_num) == (0, CFG.row_tiles), slot.name
    assert by_slot[Slot.Y].split_dim == -1


def test_backward_graph_nodes_and_task_counts():
    g = build_backward_graph(CFG)
    counts = propagate_splits(g, CFG)
    assert list(counts)[:7] == ["BwdDispatch", "GMM_act_grad", "GMM_w2_grad", "SwiGLU_grad", "GMM_gate_grad",
                                "GMM_w1_grad", "BwdCombine"]
    e = CFG.experts_per_rank
    assert counts["GMM_w2_grad"] == e * CFG.inter // CFG.wgrad_tile
    assert counts["GMM_w1_grad"] == e * CFG.hidden // CFG.wgrad_tile
    assert counts["TopkWeightGrad"] == CFG.token_tiles
    for name in ("GMM_act_grad", "SwiGLU_grad", "GMM_gate_grad", "BwdCombine"):
        assert counts[name] == CFG.row_tiles, name


def test_labels_live_on_tensors_shared_by_producer_and_consumer():
    g = build_forward_graph(CFG)
    ops = {op.name: op for op in g.nodes}
    assert ops["Dispatch"].outputs[2] is ops["GMM1"].inputs[0]
    assert ops["GMM1"].outputs[0] is ops["SwiGLU"].inputs[0]
    propagate_splits(g, CFG)
    assert ops["GMM1"].inputs[0].split_num == CFG.row_tiles


def test_combine_ignores_its_metadata_inputs():
    g = build_forward_graph(CFG)
    propagate_splits(g, CFG)
    combine = next(op for op in g.nodes if op.name == "Combine")
    assert all(t.split_dim == -1 for t in combine.inputs[1:]) and combine.task_num == CFG.row_tiles


def test_metadata_input_cannot_carry_a_split():
    t = tensor_specs(CFG)
    with pytest.raises(ScheduleError, match="metadata input"):
        OperatorNode("Bad", TaskType.SWIGLU, QueueType.VTQ, [t[Slot.RECV_COUNTS]], [t[Slot.A]],
                     SplitSpec(((0, 0),), (0,), lambda c: 2))


def _forward_with_gmm1_requiring(dim: int) -> OperatorGraph:
    g = build_forward_graph(CFG)
    gmm1 = next(op for op in g.nodes if op.name == "GMM1")
    gmm1.split = dataclasses.replace(gmm1.split, split_inputs=((0, dim),))
    return g


def test_fallback_to_one_unsplit_task_when_the_label_is_missing():
    g = _forward_with_gmm1_requiring(1)  # recv_x is split on dim 0, so GMM1 falls back
    counts = propagate_splits(g, CFG)
    assert counts["Dispatch"] == CFG.row_tiles
    assert counts["GMM1"] == 1 and counts["SwiGLU"] == 1 and counts["GMM2"] == 1
    h = next(t for t in g.tensors() if t.slot == Slot.H)
    assert (h.split_dim, h.split_num) == (-1, 1)


def test_fallback_schedule_still_compiles_and_validates():
    g = _forward_with_gmm1_requiring(1)
    group = build_group_tasks(CFG, "fwd", graph=g)
    schedules = [schedule_rank(group, r) for r in range(CFG.ep)]
    assert validate(schedules) == []
    gmm = [t for t in group.rank_tasks(0) if t.op_name == "GMM1"]
    assert len(gmm) == 1 and gmm[0].inputs[0].rows == CFG.recv_rows  # one task over every row
    puts = [t for t in group.rank_tasks(0) if t.task_type == TaskType.COMBINE_PUT]
    assert len(puts) == CFG.ep  # a put has one destination: one whole-slot put per destination


def test_cyclic_operator_graph_is_rejected():
    t = tensor_specs(CFG)
    a = OperatorNode("A", TaskType.SWIGLU, QueueType.VTQ, [t[Slot.H]], [t[Slot.A]], SplitSpec(None, (0,), lambda c: 1))
    b = OperatorNode("B", TaskType.SWIGLU, QueueType.VTQ, [t[Slot.A]], [t[Slot.H]], SplitSpec(None, (0,), lambda c: 1))
    with pytest.raises(ScheduleError, match="cycle"):
        propagate_splits(OperatorGraph("cyclic", [a, b]), CFG)
