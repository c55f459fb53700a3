"""Column-split weight-gradient tasks (wgrad_split.py, opt-in): the default, the tasks' regions, their claim
order, and both validators on split groups."""
from __future__ import annotations

import pytest

from hpmoe import wgrad_split
from hpmoe.compiler import build_group_tasks
from hpmoe.config import make_config
from hpmoe.errors import ConfigError
from hpmoe.graphs import tensor_specs
from hpmoe.runtime import native
from hpmoe.ssc_format import Slot, TaskType
from hpmoe.ssc_io import to_bytes
from hpmoe.validate import validate
from hpmoe.worker_queues import _pool_units
from schedule_tools import compile_group

# MoEFFN's schedules on one H200 (hpmoe.torch.runtime): DeepSeek-V3 experts with row pipelines and the pool,
# Mixtral's with mixed queues and the pool.
DEEPSEEK = dict(ep=1, tokens=8192, hidden=7168, inter=2048, experts_per_rank=8, topk=8, dtype="bf16", tile_m=128,
                wgrad_tile=128, num_aic=128, num_aiv=4, mixed_queues=True, row_pipelines=True, claim_pool=True)
MIXTRAL = dict(ep=1, tokens=4096, hidden=4096, inter=14336, experts_per_rank=8, topk=2, dtype="bf16",
               tile_m=128, wgrad_tile=128, num_aic=112, num_aiv=20, mixed_queues=True, claim_pool=True)


@pytest.mark.parametrize("shape", [DEEPSEEK, MIXTRAL])
def test_the_compiler_never_splits_on_its_own(shape):
    """Measured slower at DeepSeek-V3 8192 tokens (wgrad_split.py): opt-in only."""
    cfg = make_config(None, shape)
    assert wgrad_split.wgrad_n_block(cfg) == 0
    assert wgrad_split.wgrad_col_blocks(cfg, cfg.hidden) == [(0, cfg.hidden)]
    split = cfg.replace(wgrad_n_block=1024)
    assert wgrad_split.wgrad_col_blocks(split, 7168) == [(c, 1024) for c in range(0, 7168, 1024)]


def test_explicit_block_needs_the_pool_and_a_multiple_of_8():
    assert wgrad_split.wgrad_n_block(make_config(None, {**MIXTRAL, "wgrad_n_block": 512})) == 512
    without_pool = make_config(None, {**MIXTRAL, "wgrad_n_block": 512, "claim_pool": False})
    assert wgrad_split.wgrad_n_block(without_pool) == 0  # AscendC and the A3 model take whole widths
    with pytest.raises(ConfigError, match="wgrad_n_block=12 is not a multiple of 8"):
        make_config("small", {"wgrad_n_block": 12})


def _blocks(cfg, slot):
    s = compile_group(cfg, "bwd")[0]
    return s, [t for t in s.tasks if t["task_type"] == TaskType.GMM_WEIGHT_GRAD and t["outputs"][0]["slot"] == slot]


@pytest.mark.parametrize("transposed", [False, True])
def test_split_tasks_tile_dw_once_and_read_dy_on_their_columns(transposed):
    cfg = make_config("small", {"ep": 2, "mixed_queues": True, "claim_pool": True, "wgrad_n_block": 24,
                                "weights_transposed": transposed})
    for slot in (Slot.DW1, Slot.DW2):
        s, tasks = _blocks(cfg, slot)
        covered = set()
        for t in tasks:
            out, dy = t["outputs"][0], t["inputs"][1]
            assert (int(dy["col_offset"]), int(dy["cols"])) == (int(out["col_offset"]), int(out["cols"]))
            cells = {(r, c) for r in range(int(out["row_offset"]), int(out["row_offset"]) + int(out["rows"]))
                     for c in range(int(out["col_offset"]), int(out["col_offset"]) + int(out["cols"]))}
            assert not covered & cells, f"{slot.name}: a cell written twice"
            covered |= cells
        experts, per_expert, cols = tensor_specs(cfg)[slot].shape
        rows = experts * per_expert
        assert len(covered) == rows * cols, f"{slot.name}: not every cell written"
        assert {int(t["outputs"][0]["cols"]) for t in tasks} <= {24, cols % 24 or 24}


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
@pytest.mark.parametrize("over", [dict(wgrad_n_block=24), dict(wgrad_n_block=8, weights_transposed=True),
                                  dict(wgrad_n_block=16, row_pipelines=True), dict(wgrad_n_block=32, ep=3, topk=3)])
def test_split_groups_pass_both_validators(direction, over):
    cfg = make_config("small", {"ep": 2, "mixed_queues": True, "claim_pool": True, **over})
    schedules = compile_group(cfg, direction)
    assert validate(schedules) == []
    error, _ = native.validate_ssc([to_bytes(s) for s in schedules])  # the C++ load-time validator
    assert not error, error


def test_slabs_of_one_column_block_are_claimed_one_after_another():
    cfg = make_config("small", {"ep": 1, "mixed_queues": True, "claim_pool": True, "wgrad_n_block": 16})
    tasks = build_group_tasks(cfg, "bwd").tasks
    pool = [u[0] for u in _pool_units(cfg, tasks, [], [], []) if u[0].task_type == TaskType.GMM_WEIGHT_GRAD]
    keys = [(t.op_id, t.expert, t.outputs[0].col_offset, t.outputs[0].row_offset) for t in pool]
    assert keys == sorted(keys), "claim order: op, expert, column block, row slab"
    assert len({k[2] for k in keys}) > 1 and len({k[3] for k in keys}) > 1, "split in both directions"


@pytest.mark.parametrize("shape, tokens, want", [
    ((4096, 1536, 128, 8), 4096, 0),      # Qwen3-235B-A22B: 256 rows an expert, whole widths (3072, 4096)
    ((4096, 14336, 8, 2), 4096, 2048),    # Mixtral-8x7B: 1024 rows, 16 K steps a tile, 8 tiles a unit
    ((6144, 16384, 8, 2), 4096, 2048),    # Mixtral-8x22B: the same rows
    ((7168, 2048, 8, 8), 1024, 2048),     # DeepSeek-V3 experts at 1024 tokens: 1024 rows an expert
    ((7168, 2048, 8, 8), 4096, 1024),     # ... at 4096 tokens: 64 steps a tile, the default block holds 256
    ((7168, 2048, 8, 8), 8192, 1024),     # ... at 8192: long tiles, the default block
    ((2880, 2880, 32, 4), 4096, 4096),    # gpt-oss-20b: 512 rows, 8 steps a tile, 16 tiles a unit
    ((2048, 1408, 64, 6), 4096, 0),       # DeepSeek-V2-Lite: 384 rows, 11 tiles cover 2I (2816)
    ((512, 256, 8, 2), 4096, 0),          # no weight gradient wider than the block
])
def test_the_op_widens_units_where_experts_get_few_rows(shape, tokens, want):
    """MoeFfnRuntime's rule (wgrad_split.default_wgrad_n_block): at least TARGET_UNIT_STEPS K steps a unit, the
    default block where that already holds them, whole widths where the unit would cover them."""
    h, inter, experts, topk = shape
    got = wgrad_split.default_wgrad_n_block(h, inter, tokens * topk / experts)
    assert got == want
    rows = tokens * topk / experts
    steps = -(-rows // wgrad_split.K_STEP)
    if got:
        assert got // 256 * steps >= wgrad_split.TARGET_UNIT_STEPS or got == wgrad_split.DEFAULT_BLOCK
        if got > wgrad_split.DEFAULT_BLOCK:  # no wider than it takes
            assert (got // 256 - 1) * steps < wgrad_split.TARGET_UNIT_STEPS
    else:
        assert max(h, 2 * inter) <= max(wgrad_split.DEFAULT_BLOCK,
                                        256 * -(-wgrad_split.TARGET_UNIT_STEPS // steps))
    assert wgrad_split.default_wgrad_n_block(h, inter) == (1024 if max(h, 2 * inter) > 1024 else 0)


def test_a_two_block_worker_holds_half_a_unit_each():
    """The 2-block cluster worker deals a unit's column tiles between its blocks: at the Mixtrals each block
    holds 64 K steps between two transitions, the width session 33 measured best for that build (2048 columns)."""
    rows = 4096 * 2 / 8
    got = wgrad_split.default_wgrad_n_block(6144, 16384, rows)
    assert got == 2048
    assert got // 256 // 2 * -(-rows // wgrad_split.K_STEP) == 64
