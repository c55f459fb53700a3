"""Expert-aligned receive slots (expert_aligned, kConfigExpertAligned) on the CPU twin and the AscendC kernel
on its stubs: every output against float64 (bf16, fp16, fp32; ragged row counts, empty experts, top-1 to
top-8), bitwise repeatable, and bitwise equal to the unaligned layout (each output row comes from the same
tile code over the same K order; only where the rows sit in the slot moves). A plan with pads between
experts is refused in one line when the SSC does not say the slots are aligned."""
from __future__ import annotations

import numpy as np
import pytest

from hpmoe.runtime.tolerances import compare
from hpmoe.ssc_format import Slot

from runtime_helpers import case, run_threads


def _check(outputs, ref, dtype, label):
    bad = [f"{name}: {err:.3e} > {tol:.1e}" for name, err, tol, ok in compare(outputs, ref, dtype) if not ok]
    assert not bad, f"{label}: " + "; ".join(bad)


def _first_difference(a: dict, b: dict) -> str:
    for name in a:
        if not np.array_equal(a[name].view(np.uint8), b[name].view(np.uint8)):
            return f"{name} differs"
    return ""


# Five local experts on tiles of 16 rows: most experts end inside a tile, so the unaligned layout has
# straddled tiles and the aligned one pads; 'empty' leaves experts with no rows (no span at all).
SHAPE = dict(experts_per_rank=5, ep=2, tokens=53)


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("routing,topk", [("random", 1), ("skewed", 3), ("empty", 2), ("random", 8)])
def test_aligned_matches_float64_and_the_unaligned_bits(dtype, routing, topk):
    cfg, inputs, ref = case(routing, seed=topk, dtype=dtype, topk=topk, **SHAPE)
    _, plain = run_threads(cfg, inputs)
    aligned, inputs_a, _ = case(routing, seed=topk, dtype=dtype, topk=topk, expert_aligned=True, **SHAPE)
    assert aligned.recv_rows_per_src >= cfg.recv_rows_per_src  # the pads need room (bucket_for counts them)
    out, raw = run_threads(aligned, inputs_a, iterations=2)  # invocation 2 of the same group
    label = f"{dtype=} {routing=} {topk=}"
    _check(out, ref, dtype, label)
    assert not _first_difference(plain, raw), f"aligned vs unaligned, {label}: {_first_difference(plain, raw)}"
    _, again = run_threads(aligned, inputs_a)  # a fresh group
    assert not _first_difference(raw, again), f"repeat, {label}: {_first_difference(raw, again)}"


@pytest.mark.parametrize("variant", [dict(mixed_queues=True), dict(mixed_queues=True, claim_pool=True),
                                     dict(mixed_queues=True, row_pipelines=True, claim_pool=True),
                                     dict(mixed_queues=True, fuse_swiglu=True, inter=128, act_n_block=128),
                                     dict(gmm_n_block=16, weights_transposed=True)])
def test_aligned_under_every_schedule_variant(variant):
    cfg, inputs, ref = case("skewed", seed=5, dtype="bf16", topk=3, **SHAPE, **variant)
    _, plain = run_threads(cfg, inputs)
    aligned = cfg.replace(expert_aligned=True, recv_rows_per_src=0)
    from hpmoe.runtime.routing import bucket_for
    aligned = aligned.replace(recv_rows_per_src=bucket_for(aligned, inputs.topk_ids))
    out, raw = run_threads(aligned, inputs)
    _check(out, ref, "bf16", f"{variant=}")
    assert not _first_difference(plain, raw), f"{variant=}: {_first_difference(plain, raw)}"


@pytest.mark.parametrize("routing,topk", [("random", 2), ("empty", 2)])
def test_ascendc_kernel_runs_aligned_slots(routing, topk):
    from hpmoe.runtime.twin import CpuTwin
    cfg, inputs, ref = case(routing, seed=7, dtype="bf16", topk=topk, num_aiv=4, expert_aligned=True, **SHAPE)
    with CpuTwin(cfg, backend="ascendc-cpu") as twin:
        twin.load_inputs(inputs)
        twin.run_threads("fwd")
        twin.run_threads("bwd")
        out = twin.outputs()
    _check(out, ref, "bf16", f"ascendc-cpu {routing=}")


@pytest.mark.parametrize("backend", ["cpu", "ascendc-cpu"])
@pytest.mark.parametrize("value", [-2, 53 * 2])
def test_corrupt_pad_entry_is_refused_in_one_line(backend, value):
    """A pad between experts overwritten with something that is neither -1 nor a t*k + j of this rank: the
    dispatch put names the plan, nothing hangs."""
    from hpmoe.runtime.native import RuntimeFailure
    from hpmoe.runtime.twin import CpuTwin
    cfg, inputs, _ = case("random", seed=3, dtype="bf16", topk=2, num_aiv=4, expert_aligned=True, **SHAPE)
    with CpuTwin(cfg, timeout_s=5.0, backend=backend) as twin:
        twin.load_inputs(inputs)
        rows = twin.heap.view(0, Slot.SEND_ROWS).reshape(cfg.ep, cfg.recv_rows_per_src)
        valid = np.flatnonzero(rows[0] >= 0)
        pads = [i for i in np.flatnonzero(rows[0] == -1) if i < valid.max()]
        assert pads, "the premise: a pad between two experts' rows"
        rows[0, pads[0]] = value
        with pytest.raises(RuntimeFailure, match="send_rows/token_rows entry points outside its buffer"):
            twin.run_threads("fwd")
