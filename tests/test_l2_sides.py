"""The claim pool ordered for the two halves of L2 (l2_sides.py, HPMOE_EXPERIMENT_SIDE_ORDER=1): the units that
read one weight panel sit on positions of one parity, every unit still after the pool units it waits on, and
the schedule validates."""
from __future__ import annotations

import pytest

from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config
from hpmoe.ssc_format import QueueType, TaskType
from hpmoe.validate import validate

MIXED = dict(ep=1, dtype="bf16", tile_m=128, wgrad_tile=128, mixed_queues=True, claim_pool=True,
             row_pipelines=False, num_aic=112, num_aiv=20, first_gmm_pool=True, wgrad_n_block=1024)
GMMS = (int(TaskType.GMM), int(TaskType.GMM_TRANS_B), int(TaskType.GMM_WEIGHT_GRAD))


def _pool(s):
    """The pool's units in claim order, each as (task id, its first task's record)."""
    return [(int(s.entries[q["first_entry"]]), s.tasks[s.entries[q["first_entry"]]])
            for q in s.queues if q["queue_type"] == int(QueueType.POOL)]


def _panel(t, group_rows: int):
    out = t["outputs"][0]
    if t["task_type"] == int(TaskType.GMM_WEIGHT_GRAD):
        return (int(t["op_id"]), int(t["expert"]), int(out["col_offset"]))
    return (int(t["op_id"]), int(out["row_offset"]) // group_rows, int(out["col_offset"]))


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_a_panels_units_share_a_parity(monkeypatch, direction):
    # Mixtral-8x7B experts, 4096 tokens: 8 row tiles of 128 an expert (the panel groups), 1024-column wgrad units.
    cfg = make_config(None, dict(MIXED, tokens=4096, hidden=4096, inter=14336, experts_per_rank=8, topk=2))
    cfg = cfg.replace(recv_rows_per_src=cfg.max_rows_per_pair)
    (plain,) = compile_schedules(cfg, [direction], [0])
    monkeypatch.setenv("HPMOE_EXPERIMENT_SIDE_ORDER", "1")
    (sided,) = compile_schedules(cfg, [direction], [0])
    assert validate([sided]) == []
    units, before = _pool(sided), _pool(plain)
    ids = [i for i, _ in units]
    assert sorted(ids) == sorted(i for i, _ in before), "the same units, each once"
    assert ids != [i for i, _ in before], "the order changed"
    parity: dict = {}
    mixed = 0
    gmm_units = 0
    for pos, (_, t) in enumerate(units):
        if t["task_type"] not in GMMS:
            continue
        gmm_units += 1
        key = _panel(t, 8 * 128)
        if parity.setdefault(key, pos % 2) != pos % 2:
            mixed += 1
    assert gmm_units > 0
    # Only the tail, where one half's list ran out and the other's fills both parities, may mix a panel (none do here).
    assert mixed <= gmm_units // 100, f"{mixed} of {gmm_units} GMM units off their panel's parity"

