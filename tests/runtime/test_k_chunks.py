"""K chunks of the second GMMs (k_chunks.py): the CPU twin against float64, deterministic, and the schedule
rules (one chain per output tile, each link waiting on the one before) that the validator checks."""
from __future__ import annotations

import numpy as np
import pytest

from hpmoe.config import make_config
from hpmoe.errors import ConfigError
from hpmoe.k_chunks import k_chunks
from hpmoe.ssc_format import NO_EVENT, Slot, TaskType
from hpmoe.validate import validate
from hpmoe.workspace import plan_workspace
from hpmoe.runtime.tolerances import compare

from runtime_helpers import case, run_threads
from schedule_tools import compile_group

POOLED = dict(mixed_queues=True, claim_pool=True, wgrad_tile=16)
# K 2I = 192 in chunks 64 (3), GMM2's K = I = 96 in 64 + 32 (a short last chunk)
CHUNKED = dict(POOLED, ep=3, inter=96, gmm_k_block=64, tokens=96)


@pytest.mark.parametrize("overrides", [
    dict(CHUNKED, routing="skewed", dtype="bf16"),
    dict(CHUNKED, dtype="fp16", weights_transposed=True, first_gmm_pool=True),
    dict(POOLED, ep=2, inter=160, gmm_k_block=128, expert_aligned=True, tokens=64),  # fp32, 3 chunks / 2
    dict(CHUNKED, ep=1, topk=1, routing="empty"),                                   # experts with no rows
])
def test_twin_matches_float64_and_repeats_bitwise(overrides):
    """Tolerances: hpmoe/runtime/tolerances.py (the K-whole twin's table: the chunks add the same fp32 products,
    only grouped by chunk, so the error bound is unchanged)."""
    cfg, inputs, ref = case(**overrides)
    out, raw = run_threads(cfg, inputs)
    bad = [f"{n}: {err:.3e} > {tol:.1e}" for n, err, tol, ok in compare(out, ref, cfg.dtype) if not ok]
    assert not bad, "; ".join(bad)
    _, again = run_threads(cfg, inputs)
    assert all(np.array_equal(raw[n], again[n]) for n in raw)


def test_chunks_are_whole_k_steps_in_k_order():
    cfg = make_config("small", CHUNKED)
    assert k_chunks(cfg, 192) == [(0, 64), (64, 64), (128, 64)]
    assert k_chunks(cfg, 96) == [(0, 64), (64, 32)]
    assert k_chunks(cfg, 64) == [(0, 64)]
    with pytest.raises(ConfigError, match="gmm_k_block=96 is not a multiple of 64"):
        make_config("small", dict(CHUNKED, gmm_k_block=96))
    with pytest.raises(ConfigError, match="gmm_k_block needs mixed_queues and claim_pool"):
        make_config("small", dict(CHUNKED, claim_pool=False))


def _chunk_tasks(s, task_type):
    t = s.tasks
    return [i for i in range(len(t)) if int(t[i]["task_type"]) == task_type and
            (int(t[i]["inputs"][3]["slot"]) == Slot.GMM_PARTIAL or int(t[i]["outputs"][0]["slot"]) == Slot.GMM_PARTIAL)]


def test_compiled_chains_are_valid_and_each_link_waits_on_the_last():
    cfg = make_config("small", CHUNKED)
    for direction, task_type in (("fwd", TaskType.GMM), ("bwd", TaskType.GMM_TRANS_B)):
        group = compile_group(cfg, direction)
        assert validate(group) == []
        s = group[0]
        chunks = _chunk_tasks(s, task_type)
        assert chunks, direction
        middle = [i for i in chunks if int(s.tasks[i]["inputs"][3]["slot"]) == Slot.GMM_PARTIAL]
        # a link waits on its input chunk's producers and its predecessor: the counts come through the chain
        assert all(sum(e != NO_EVENT for e in s.tasks[i]["dependent_event"]) == 2 for i in middle)


def test_a_link_that_does_not_wait_on_its_predecessor_is_caught():
    cfg = make_config("small", CHUNKED)
    group = compile_group(cfg, "bwd")
    s = group[0]
    link = next(i for i in _chunk_tasks(s, TaskType.GMM_TRANS_B) if int(s.tasks[i]["inputs"][3]["slot"]) == Slot.GMM_PARTIAL)
    s.tasks[link]["dependent_event"][1] = NO_EVENT  # the chain event is the later wait (the sum is input 3)
    errors = validate(group)
    assert any("GMM_PARTIAL" in e and "without waiting for its latest writer" in e for e in errors), errors
    assert any("but the later does not wait on the earlier" in e for e in errors), errors


def test_the_running_sum_shares_the_workspace_and_is_absent_unless_chunked():
    plan = plan_workspace(make_config("small", CHUNKED))
    assert plan.offsets[Slot.GMM_PARTIAL] == 0  # both directions use it: first, at one offset
    assert Slot.GMM_PARTIAL not in plan_workspace(make_config("small", dict(CHUNKED, gmm_k_block=0))).offsets
