"""The compiler side of the activation column split (act_split.py): the rule per shape, refused knob values,
the regions of a split SwiGLU / SwiGLU-grad task, the events that follow (one wait per H, each GMM2 or
gate-gradient row tile on every block of its row), and both validators on split groups."""
from __future__ import annotations

import pytest

from hpmoe import act_split, task_access
from hpmoe import config as config_module
from hpmoe.config import make_config
from hpmoe.errors import ConfigError, HpmoeError
from hpmoe.runtime import native
from hpmoe.ssc_format import NO_EVENT, NO_SLOT, Section, Slot, TaskType
from hpmoe.ssc_io import to_bytes
from hpmoe.validate import validate
from schedule_tools import compile_group
from ssc_edit import edit, records

MIXTRAL = dict(ep=1, tokens=4096, hidden=4096, inter=14336, experts_per_rank=8, topk=2, dtype="bf16", tile_m=128,
               wgrad_tile=256, num_aic=112, num_aiv=20, mixed_queues=True, claim_pool=True)


def test_rule_keeps_whole_rows_and_an_explicit_block_splits_both():
    cfg = make_config(None, MIXTRAL)  # the GMM split in force with mixed queues: still whole rows (session 18)
    assert act_split.act_n_block(cfg) == 0 and act_split.act_blocks(cfg) == [(0, 14336)]
    split = cfg.replace(act_n_block=2048)
    assert act_split.act_blocks(split) == [(c0, 2048) for c0 in range(0, 14336, 2048)]
    tasks = {d: [int(t) for s in compile_group(split, d) for t in s.tasks["task_type"]] for d in ("fwd", "bwd")}
    assert tasks["fwd"].count(TaskType.SWIGLU) == 7 * 64 and tasks["bwd"].count(TaskType.SWIGLU_GRAD) == 7 * 64
    whole = {d: [int(t) for s in compile_group(cfg, d) for t in s.tasks["task_type"]] for d in ("fwd", "bwd")}
    assert whole["fwd"].count(TaskType.SWIGLU) == 64 and whole["bwd"].count(TaskType.SWIGLU_GRAD) == 64


@pytest.mark.parametrize("over", [dict(mixed_queues=False, claim_pool=False), dict(row_pipelines=True),
                                  dict(tokens=65536), dict(gmm_n_block=16384)])
def test_rule_keeps_whole_rows(over):
    """No GMM split, no mixed queues, row pipelines, or a GMM block as wide as I: whole rows as everywhere."""
    cfg = make_config(None, {**MIXTRAL, **over})
    assert act_split.act_n_block(cfg) == 0 and act_split.act_blocks(cfg) == [(0, cfg.inter)]


def test_explicit_block_wins_and_whole_width_turns_it_off():
    cfg = make_config(None, {**MIXTRAL, "act_n_block": 4096})
    assert act_split.act_blocks(cfg)[-1] == (12288, 2048)
    assert act_split.act_n_block(cfg.replace(act_n_block=14336)) == 0
    assert act_split.act_n_block(make_config("small", {"act_n_block": 8})) == 8  # no GMM split: any multiple of 8


@pytest.mark.parametrize("over,message", [
    (dict(act_n_block=12), "act_n_block=12 is not a multiple of 8"),
    (dict(act_n_block=8, gmm_n_block=16), "act_n_block=8 is not a multiple of the GMM column block 16"),
    (dict(act_n_block=8, weights_transposed=True), "act_n_block=8 is not a multiple of wgrad_tile=16"),
])
def test_bad_blocks_are_refused_in_one_line(over, message):
    with pytest.raises(ConfigError, match=message) as err:
        make_config("small", over)
    assert "\n" not in str(err.value)


def _tasks(s, task_type):
    return [t for t in s.tasks if t["task_type"] == task_type]


def _region(ref) -> tuple[int, int, int]:
    return int(ref["slot"]), int(ref["col_offset"]), int(ref["cols"])


def test_split_regions_and_waits_forward():
    cfg = make_config("small", {"ep": 2, "gmm_n_block": 16, "act_n_block": 16, "mixed_queues": True})  # I = 32
    s = compile_group(cfg, "fwd")[0]
    first = [t for t in _tasks(s, TaskType.SWIGLU) if t["outputs"][0]["row_offset"] == 0]
    assert [[_region(r) for r in t["inputs"][:3]] for t in first] == [
        [(Slot.H, 0, 16), (Slot.H, 32, 16), (Slot.RECV_COUNTS, 0, cfg.experts_per_rank)],
        [(Slot.H, 16, 16), (Slot.H, 48, 16), (Slot.RECV_COUNTS, 0, cfg.experts_per_rank)]]
    assert [_region(t["outputs"][0]) for t in first] == [(Slot.A, 0, 16), (Slot.A, 16, 16)]
    for t in first:  # gate and up: one event of the two GMM1 blocks they read; the counts another
        waits = [int(e) for e in t["dependent_event"] if e != NO_EVENT]
        assert sorted(int(s.events[e]["threshold"]) for e in waits) == [2, cfg.ep]
    gmm2 = next(t for t in _tasks(s, TaskType.GMM) if t["outputs"][0]["slot"] == Slot.Y_EXPERT and
                t["outputs"][0]["row_offset"] == 0)
    assert 2 in [int(s.events[e]["threshold"]) for e in gmm2["dependent_event"] if e != NO_EVENT]
    assert int(s.tilings[int(first[0]["tiling_data_position"])]["n"]) == 16


def test_split_regions_backward():
    cfg = make_config("small", {"ep": 2, "gmm_n_block": 16, "mixed_queues": True, "act_n_block": 16})
    s = compile_group(cfg, "bwd")[0]
    grad = next(t for t in _tasks(s, TaskType.SWIGLU_GRAD) if t["outputs"][0]["row_offset"] == 0 and
                t["inputs"][0]["col_offset"] == 16)
    assert [_region(r) for r in grad["inputs"]] == [(Slot.DA, 16, 16), (Slot.H, 16, 16), (Slot.H, 48, 16),
                                                   (Slot.RECV_COUNTS, 0, cfg.experts_per_rank)]
    assert [_region(r) for r in grad["outputs"]] == [(Slot.DH, 16, 16), (Slot.DH, 48, 16)]


CASES = [dict(gmm_n_block=16, act_n_block=16, mixed_queues=True),
         dict(gmm_n_block=8, act_n_block=8, mixed_queues=True, claim_pool=True),
         dict(inter=40, wgrad_tile=8, gmm_n_block=16, act_n_block=16, mixed_queues=True),  # I not a multiple of it
         dict(gmm_n_block=16, act_n_block=16, weights_transposed=True, mixed_queues=True, claim_pool=True, ep=3,
              topk=3),
         dict(inter=40, wgrad_tile=8, gmm_n_block=16, act_n_block=32, weights_transposed=True, mixed_queues=True),
         dict(gmm_n_block=8, act_n_block=16, mixed_queues=True, row_pipelines=True, claim_pool=True),
         dict(act_n_block=8)]  # dealt CTQ / VTQ without mixed queues: only the AscendC kernel refuses it


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
@pytest.mark.parametrize("over", CASES)
def test_split_groups_pass_both_validators_and_the_access_table(direction, over):
    cfg = make_config("small", {"ep": 2, **over})
    assert act_split.act_n_block(cfg), "the case must split"
    schedules = compile_group(cfg, direction)
    assert validate(schedules) == []
    error, _ = native.validate_ssc([to_bytes(s) for s in schedules])  # the C++ load-time validator
    assert not error, error
    for s in schedules:
        for t in s.tasks:
            ins = [int(x) for x in t["inputs"]["slot"] if x != NO_SLOT]
            outs = [int(x) for x in t["outputs"]["slot"] if x != NO_SLOT]
            rows = [r for r in task_access.TASK_ACCESS
                    if r.task_type == int(t["task_type"]) and task_access.matches(r, s.direction, ins, outs,
                                                                                  cfg.weights_transposed)]
            assert len(rows) == 1, (TaskType(int(t["task_type"])).name, ins, outs)


def test_cpp_validator_refuses_a_split_swiglu_writing_h():
    cfg = make_config("small", {"ep": 1, "act_n_block": 16})
    blob = to_bytes(compile_group(cfg, "fwd")[0])
    tasks, _ = records(blob, Section.TASKS)
    i = next(i for i, t in enumerate(tasks) if t["task_type"] == TaskType.SWIGLU)
    error, _ = native.validate_ssc([edit(blob, Section.TASKS, i, "outputs", int(Slot.H), "slot", 0)])
    assert "outputs[0].slot" in error and "takes a there" in error, error


def test_a3_model_refuses_in_one_line():
    from hpmoe.sim.api import check_hw_fits
    from hpmoe.sim.hw import load_hw
    cfg = make_config("small", {"act_n_block": 16})
    with pytest.raises(HpmoeError, match="--act-n-block"):
        check_hw_fits(cfg, load_hw())


@pytest.mark.parametrize("inter,act,wgrad", [(40, 8, 16), (48, 8, 16), (48, 16, 32), (40, 16, 16), (48, 24, 16),
                                            (48, 32, 16), (40, 8, 0), (56, 8, 24)])
def test_a_block_is_refused_exactly_when_the_compiler_would_need_a_third_trigger(monkeypatch, inter, act, wgrad):
    # dW1 in column blocks: a SwiGLU-gradient task's gate and up columns may feed blocks that wait on different
    # tasks (an I that is not a multiple of the block: DBRX's 10752 with 1024), one event too many. The check
    # must refuse those configs in one line and no other: compiled without it, a refused one must fail.
    over = dict(ep=1, inter=inter, act_n_block=act, wgrad_n_block=wgrad, wgrad_tile=8, claim_pool=True)
    try:
        make_config("small", over)
        refused = None
    except ConfigError as err:
        refused = str(err)
    monkeypatch.setattr(config_module, "check_block", lambda cfg: None)
    try:
        compile_group(make_config("small", over), "bwd")
        compiled = True
    except HpmoeError as err:
        compiled = False
        assert "triggers at most" in str(err), err
    assert (refused is None) == compiled, (refused, compiled)
    if refused:
        assert "\n" not in refused and "triggers at most 2 events" in refused, refused
