"""The compiler side of issue 16: column-split GMM tasks (gmm_split.py) and nn.Linear's weight layout
(weights_transposed): the split rule per shape, regions and events that follow, the validators, refusals."""
from __future__ import annotations

import pytest

from hpmoe import gmm_split, task_access
from hpmoe.config import make_config
from hpmoe.errors import ConfigError
from hpmoe.runtime import native
from hpmoe.ssc_format import Direction, Section, Slot, TaskType
from hpmoe.ssc_io import to_bytes
from hpmoe.validate import validate
from schedule_tools import compile_group
from ssc_edit import edit, records

MIXTRAL = dict(ep=1, tokens=4096, hidden=4096, inter=14336, experts_per_rank=8, topk=2, dtype="bf16", tile_m=128,
               wgrad_tile=256, num_aic=112, num_aiv=20, mixed_queues=True)


def test_rule_splits_wide_experts_with_few_row_tiles():
    cfg = make_config(None, MIXTRAL)
    assert gmm_split.busy_row_tiles(cfg) == 64
    block = gmm_split.auto_n_block(cfg)  # 112 workers / 64 tiles: the narrowest op (h 4096) in >= 2 blocks
    assert block == 2048 and block % gmm_split.GMM_TILE_N == 0
    assert len(gmm_split.col_blocks(cfg, 2 * cfg.inter)) * 64 >= cfg.num_aic
    assert gmm_split.col_blocks(cfg, cfg.inter)[-1] == (12288, 2048)


def test_rule_gives_long_k_ops_narrower_blocks():
    cfg = make_config(None, MIXTRAL)
    h, inter = cfg.hidden, cfg.inter
    # Tasks of about equal work: GMM1 and the activation gradient (K = h) keep the rule's 2048 columns, GMM2
    # (K = I) and the gate gradient (K = 2I) get 2048 * h / K, down to the GPU tile's 256.
    assert [gmm_split.op_block(cfg, k) for k in (h, inter, 2 * inter)] == [2048, 512, 256]
    assert len(gmm_split.col_blocks(cfg, h, inter)) == 8 and len(gmm_split.col_blocks(cfg, h, 2 * inter)) == 16
    assert gmm_split.col_blocks(cfg, 2 * inter, h) == gmm_split.col_blocks(cfg, 2 * inter)
    explicit = cfg.replace(gmm_n_block=1024)  # an explicit block (hpmoe tune) is every op's block
    assert [gmm_split.op_block(explicit, k) for k in (h, inter, 2 * inter)] == [1024, 1024, 1024]


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_long_k_blocks_compile_and_pass_both_validators(direction):
    # The small preset with I > h and few rows, so that the rule splits and scales the blocks.
    cfg = make_config("small", {"ep": 2, "hidden": 1024, "inter": 4096, "tokens": 32, "topk": 1, "num_aic": 4,
                                "mixed_queues": True, "claim_pool": True, "wgrad_tile": 32})
    assert gmm_split.auto_n_block(cfg) > 0 and gmm_split.op_block(cfg, 2 * cfg.inter) < gmm_split.n_block(cfg)
    schedules = compile_group(cfg, direction)
    assert validate(schedules, group=True) == []
    error, _ = native.validate_ssc([to_bytes(s) for s in schedules])
    assert not error, error
    s = schedules[0]
    op = TaskType.GMM if direction == "fwd" else TaskType.GMM_TRANS_B
    long_k_out = Slot.Y_EXPERT if direction == "fwd" else Slot.DX_EXPERT
    k = cfg.inter if direction == "fwd" else 2 * cfg.inter
    cols = {int(t["outputs"][0]["cols"]) for t in s.tasks
            if t["task_type"] == op and t["outputs"][0]["slot"] == long_k_out}
    assert cols == {gmm_split.op_block(cfg, k)}


@pytest.mark.parametrize("over", [dict(preset="deepseek-v3"), dict(row_pipelines=True), dict(tokens=65536),
                                  dict(mixed_queues=False)])
def test_rule_keeps_whole_widths_when_row_tiles_fill_the_workers(over):
    preset = over.pop("preset", None)
    cfg = make_config(preset, {} if preset else {**MIXTRAL, **over})
    assert gmm_split.auto_n_block(cfg) == 0
    assert gmm_split.col_blocks(cfg, 2 * cfg.inter) == [(0, 2 * cfg.inter)]


# DBRX's experts at 4096 tokens, top-4 of 16: 128 row tiles, 15 of them holding two experts' rows.
DBRX = dict(ep=1, tokens=4096, hidden=6144, inter=10752, experts_per_rank=16, topk=4, dtype="bf16", tile_m=128,
            wgrad_tile=128, num_aic=112, num_aiv=20, mixed_queues=True)


def test_rule_splits_when_row_tiles_are_about_as_many_as_the_workers():
    cfg = make_config(None, DBRX)
    assert gmm_split.busy_row_tiles(cfg) == 128 and gmm_split.straddled_row_tiles(cfg) == 15
    assert gmm_split.chain_waves(cfg) == pytest.approx(143 / 132)
    assert gmm_split.chain_waves(cfg) < gmm_split.MIN_CHAIN_WAVES
    # Tiles >= workers: two blocks of the narrowest op (h 6144), not ceil(workers / tiles) = 1.
    assert gmm_split.auto_n_block(cfg) == 3072
    # Twice the tokens: 256 tiles of work for 132 blocks, whole widths.
    assert gmm_split.auto_n_block(make_config(None, {**DBRX, "tokens": 8192})) == 0


def test_straddled_tiles_are_at_most_the_busy_tiles():
    cfg = make_config(None, {**DBRX, "experts_per_rank": 128, "topk": 1, "tokens": 1024})
    assert gmm_split.straddled_row_tiles(cfg) == gmm_split.busy_row_tiles(cfg) == 8


def test_explicit_block_must_be_a_multiple_of_8():
    with pytest.raises(ConfigError, match="gmm_n_block=12 is not a multiple of 8"):
        make_config("small", {"gmm_n_block": 12})


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
@pytest.mark.parametrize("over", [dict(gmm_n_block=24), dict(gmm_n_block=8, weights_transposed=True),
                                  dict(gmm_n_block=16, mixed_queues=True, row_pipelines=True, claim_pool=True),
                                  dict(weights_transposed=True, ep=3, topk=3)])
def test_split_and_transposed_groups_pass_both_validators(direction, over):
    cfg = make_config("small", {"ep": 2, **over})
    schedules = compile_group(cfg, direction)
    assert validate(schedules) == []
    error, _ = native.validate_ssc([to_bytes(s) for s in schedules])  # the C++ load-time validator
    assert not error, error


def test_split_gmm_tasks_cover_the_width_and_swiglu_waits_on_every_block():
    cfg = make_config("small", {"ep": 2, "gmm_n_block": 24})
    s = compile_group(cfg, "fwd")[0]
    gmm1 = [t for t in s.tasks if t["task_type"] == TaskType.GMM and t["outputs"][0]["slot"] == Slot.H]
    first_tile = [t for t in gmm1 if t["outputs"][0]["row_offset"] == 0]
    assert [(int(t["outputs"][0]["col_offset"]), int(t["outputs"][0]["cols"])) for t in first_tile] == \
        [(0, 24), (24, 24), (48, 16)]
    swiglu = next(t for t in s.tasks if t["task_type"] == TaskType.SWIGLU and t["inputs"][0]["row_offset"] == 0)
    waits = [int(e) for e in swiglu["dependent_event"] if e != 0xFFFFFFFF]
    assert any(int(s.events[e]["threshold"]) == 3 for e in waits), "SwiGLU must wait on all three GMM1 blocks"
    tiling = s.tilings[int(first_tile[0]["tiling_data_position"])]
    assert int(tiling["n"]) == 24


def test_transposed_tensors_and_weight_gradient_operands():
    cfg = make_config("small", {"ep": 2, "weights_transposed": True})
    s = compile_group(cfg, "bwd")[0]
    dims = {int(t["slot"]): tuple(int(d) for d in t["dims"][:t["ndim"]]) for t in s.tensors}
    E, h, inter = cfg.experts_per_rank, cfg.hidden, cfg.inter
    assert dims[Slot.W1] == dims[Slot.DW1] == (E, 2 * inter, h)
    assert dims[Slot.W2] == dims[Slot.DW2] == (E, h, inter)
    wgrad = [t for t in s.tasks if t["task_type"] == TaskType.GMM_WEIGHT_GRAD]
    w1 = [t for t in wgrad if t["outputs"][0]["slot"] == Slot.DW1]
    assert len(w1) == E * 2 * inter // cfg.wgrad_tile  # rows of dW1t are the 2I output features
    assert {(int(t["inputs"][0]["slot"]), int(t["inputs"][1]["slot"])) for t in w1} == {(Slot.DH, Slot.RECV_X)}
    assert int(cfg.flags) & (1 << 5)


def test_access_rows_follow_the_layout():
    """A standard-layout weight-gradient task in a transposed file (and the reverse) is refused."""
    std = [r for r in task_access.TASK_ACCESS if r.task_type == TaskType.GMM_WEIGHT_GRAD]
    slots = ([Slot.RECV_X, Slot.DH, Slot.RECV_COUNTS], [Slot.DW1])
    assert sum(task_access.matches(r, Direction.BACKWARD, *slots, weights_transposed=False) for r in std) == 1
    assert sum(task_access.matches(r, Direction.BACKWARD, *slots, weights_transposed=True) for r in std) == 0


def test_cpp_validator_refuses_standard_operands_in_a_transposed_file():
    """dW1 = X^T dH operands (the standard layout's row) in a transposed file: refused by the access table."""
    cfg = make_config("small", {"ep": 1, "weights_transposed": True})
    blob = to_bytes(compile_group(cfg, "bwd")[0])
    error, _ = native.validate_ssc([blob])
    assert not error, error
    tasks, _ = records(blob, Section.TASKS)
    i = next(i for i, t in enumerate(tasks) if t["task_type"] == TaskType.GMM_WEIGHT_GRAD and
             t["outputs"][0]["slot"] == Slot.DW1)
    bad = edit(edit(blob, Section.TASKS, i, "inputs", int(Slot.RECV_X), "slot", 0), Section.TASKS, i, "inputs",
               int(Slot.DH), "slot", 1)
    error, _ = native.validate_ssc([bad])
    assert "inputs[0].slot" in error and "dh" in error.lower(), error


@pytest.mark.parametrize("rows", [17.0, 256.0, 273.0, 384.0, 1024.0])
def test_expected_tiles_per_expert_matches_sampled_routing(rows):
    """The normal approximation against sampled counts (binomial, as random routing draws them): within 3%."""
    import numpy as np
    rng = np.random.default_rng(0)
    n = 100_000
    counts = rng.binomial(n, rows / n, size=20_000)
    sampled = float(np.mean(-(-counts // 128)))
    assert abs(gmm_split.expected_tiles_per_expert(rows, 128) - sampled) <= 0.03 * sampled
    assert gmm_split.expected_tiles_per_expert(0.0, 128) == 0.0


def _moeffn_cfg(h, inter, experts, topk, tokens):
    return make_config(None, dict(ep=1, tokens=tokens, hidden=h, inter=inter, experts_per_rank=experts, topk=topk,
                                  tile_m=128, num_aic=128, num_aiv=4, mixed_queues=True, row_pipelines=True,
                                  claim_pool=True, wgrad_tile=128 if h % 128 == 0 and inter % 128 == 0 else 0))


@pytest.mark.parametrize("shape,aligned", [((4096, 1536, 128, 8, 4096), True),   # Qwen3-235B-A22B: 16% fewer tiles
                                           ((2048, 1408, 64, 6, 4096), True),    # DeepSeek-V2-Lite
                                           ((7168, 2048, 8, 8, 8192), False),    # DeepSeek-V3: 1% fewer
                                           ((2048, 1408, 60, 4, 4096), False),   # Qwen1.5-MoE: mixed, rows +47%
                                           ((6144, 10752, 16, 4, 4096), True)])  # DBRX: mixed, rows +12%
def test_default_expert_aligned_follows_the_measured_rule(shape, aligned):
    cfg = _moeffn_cfg(*shape)
    assert gmm_split.default_expert_aligned(cfg) is aligned
    on = cfg.replace(expert_aligned=True, recv_rows_per_src=0)
    assert gmm_split.straddled_row_tiles(on) == 0
    # EP 1's bucket holds any routing: every row plus a pad of up to 127 per expert, but no expert past T rows.
    most = min(cfg.tokens * cfg.topk + cfg.experts_per_rank * 127, cfg.experts_per_rank * cfg.tokens)
    assert on.recv_rows_per_src == -(-most // 128) * 128


def test_a3_model_refuses_expert_aligned_in_one_line():
    from hpmoe.errors import HpmoeError
    from hpmoe.sim.api import check_hw_fits
    from hpmoe.sim.hw import load_hw
    with pytest.raises(HpmoeError, match="compile without --expert-aligned"):
        check_hw_fits(make_config("small", {"expert_aligned": True}), load_hw())
