"""The CPU twin with weights in nn.Linear's layout (weights_transposed) and with column-split GMM tasks
(gmm_n_block): every output against float64 (bf16 and fp16, ragged row counts, empty experts, top-1 to
top-8), bitwise repeatable, and the transposed layout bitwise equal to the standard one (same products, same
summation order: the twin converts W to the standard orientation, the weight-gradient kernel sums each
element in row order whatever its operand roles)."""
from __future__ import annotations

import numpy as np
import pytest

from hpmoe.runtime.tolerances import compare

from runtime_helpers import case, run_threads


def _check(outputs, ref, dtype, label):
    bad = [f"{name}: {err:.3e} > {tol:.1e}" for name, err, tol, ok in compare(outputs, ref, dtype) if not ok]
    assert not bad, f"{label}: " + "; ".join(bad)


def _first_difference(a: dict, b: dict) -> str:
    for name in a:
        x, y = a[name].view(np.uint8), b[name].view(np.uint8)
        if not np.array_equal(x, y):
            i = int(np.flatnonzero(a[name].reshape(-1).view(np.uint8) != b[name].reshape(-1).view(np.uint8))[0])
            return f"{name} first differs at byte {i}"
    return ""


# fp32 too: its transposed weights are the one fp32 case converted into worker scratch (the scratch once had
# no room for them; the heap overflow showed under the claim pool, session 5).
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("routing,topk", [("random", 1), ("skewed", 3), ("empty", 2), ("random", 8)])
def test_transposed_layout_is_bitwise_the_standard_one(dtype, routing, topk):
    cfg, inputs, ref = case(routing, seed=topk, dtype=dtype, topk=topk)
    std, std_raw = run_threads(cfg, inputs)
    out, raw = run_threads(cfg.replace(weights_transposed=True), inputs, iterations=2)
    _check(out, ref, dtype, f"transposed {dtype=} {routing=} {topk=}")
    diff = _first_difference(std_raw, raw)
    assert not diff, f"transposed vs standard, {dtype=} {routing=} {topk=}: {diff}"


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("routing,topk,block", [("random", 2, 8), ("skewed", 4, 24), ("empty", 1, 16),
                                                ("random", 8, 40)])
@pytest.mark.parametrize("transposed", [False, True])
def test_split_widths_match_float64_and_repeat(dtype, routing, topk, block, transposed):
    cfg, inputs, ref = case(routing, seed=topk, dtype=dtype, topk=topk)
    cfg = cfg.replace(gmm_n_block=block, weights_transposed=transposed)
    label = f"{dtype=} {routing=} {topk=} {block=} {transposed=}"
    out, raw = run_threads(cfg, inputs, iterations=2)  # invocation 2 of the same group
    _check(out, ref, dtype, label)
    _, again = run_threads(cfg, inputs)                 # a fresh group
    assert not _first_difference(raw, again), f"{label}: {_first_difference(raw, again)}"


@pytest.mark.parametrize("variant", [dict(mixed_queues=True), dict(mixed_queues=True, claim_pool=True),
                                     dict(mixed_queues=True, row_pipelines=True, claim_pool=True)])
def test_split_and_transposed_under_every_queue_variant(variant):
    """Variants change which worker runs a task, never a reduction order: bitwise equal to the split deal."""
    cfg, inputs, ref = case("skewed", seed=5, dtype="bf16", topk=3, gmm_n_block=16, weights_transposed=True)
    _, base = run_threads(cfg, inputs)
    out, raw = run_threads(cfg.replace(**variant), inputs)
    _check(out, ref, "bf16", f"{variant=}")
    assert not _first_difference(base, raw), f"{variant=}: {_first_difference(base, raw)}"


@pytest.mark.parametrize("extra,message", [(dict(weights_transposed=True), "nn.Linear's layout"),
                                           (dict(gmm_n_block=16), "column blocks")])
def test_ascendc_kernel_refuses_in_one_line(extra, message):
    from hpmoe.runtime.native import RuntimeFailure
    from hpmoe.runtime.twin import CpuTwin
    cfg, inputs, _ = case(dtype="bf16", num_aiv=4, **extra)
    with pytest.raises(RuntimeFailure, match=message):
        with CpuTwin(cfg, backend="ascendc-cpu") as twin:
            twin.load_inputs(inputs)
            twin.run_threads("fwd")
