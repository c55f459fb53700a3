"""CPU twin forward + backward against the float64 reference (tolerances: hpmoe/runtime/tolerances.py)."""
from __future__ import annotations

import numpy as np
import pytest

from hpmoe.runtime.tolerances import TOLERANCE, compare

from runtime_helpers import case, run_threads

OUTPUT_NAMES = ["y", "dx", "dw1", "dw2", "dtopk_weights"]


def assert_close(out, ref, dtype):
    rows = compare(out, ref, dtype)
    assert [r[0] for r in rows] == OUTPUT_NAMES
    bad = [f"{name}: {err:.3e} > {tol:.1e}" for name, err, tol, ok in rows if not ok]
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize("ep", [4, 3])
def test_small_fp32(ep):
    cfg, inputs, ref = case(ep=ep)
    out, _ = run_threads(cfg, inputs)
    assert_close(out, ref, "fp32")


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("routing", ["balanced", "skewed", "empty"])
def test_dtypes_and_routings(dtype, routing):
    cfg, inputs, ref = case(routing=routing, ep=3, dtype=dtype)
    out, _ = run_threads(cfg, inputs)
    assert_close(out, ref, dtype)


@pytest.mark.parametrize("overrides", [
    dict(ep=5, topk=1, hidden=40, inter=20, wgrad_tile=4),                       # odd EP, top-1, h not 2^n
    dict(ep=3, topk=8, experts_per_rank=3, hidden=48, inter=24, wgrad_tile=8),   # top-8
    dict(ep=2, topk=2, tokens=37, token_tile=16, hidden=24, inter=12, wgrad_tile=4),           # ragged last token tile
    dict(ep=1),                                                                   # single rank
    dict(ep=3, mixed_queues=True, tokens=96, routing="skewed"),                   # puts, reductions on cube workers
    dict(ep=4, mixed_queues=True, row_pipelines=True, routing="skewed"),         # whole row chains per worker
    dict(ep=3, claim_pool=True, routing="skewed", dtype="bf16"),                 # weight gradients claimed
    dict(ep=3, mixed_queues=True, claim_pool=True, tokens=96, routing="skewed"),  # every worker claims
])
def test_shapes(overrides):
    cfg, inputs, ref = case(**overrides)
    out, _ = run_threads(cfg, inputs)
    assert_close(out, ref, cfg.dtype)


def test_errors_are_detected():
    """The comparison can fail: a perturbed weight moves outputs far outside the fp32 tolerance."""
    cfg, inputs, ref = case(ep=2)
    inputs.w1[0, 0, 0, 0] += 1.0
    out, _ = run_threads(cfg, inputs)
    rows = dict((name, ok) for name, _, _, ok in compare(out, ref, "fp32"))
    assert not rows["y"] and not rows["dw2"]


def test_bucket_larger_than_needed_and_single_tile_fallback():
    """Padding rows past the valid counts are never read: a roomy bucket gives the same answer."""
    cfg, inputs, ref = case(ep=3, recv_rows_per_src=192)
    out, _ = run_threads(cfg, inputs)
    assert_close(out, ref, "fp32")


def test_dynamic_dispatch_matches_static():
    cfg, inputs, ref = case(ep=3)
    out_static, raw_static = run_threads(cfg, inputs)
    out_dynamic, raw_dynamic = run_threads(cfg, inputs, dynamic=True)
    assert_close(out_dynamic, ref, "fp32")
    for name in raw_static:  # same handlers, same per-task reduction orders: bitwise equal
        assert np.array_equal(raw_static[name], raw_dynamic[name]), name


def test_mixed_queue_pool_is_bitwise_the_static_deal():
    """Second GMMs, puts, weight gradients and reductions claimed at run time by every worker (vector-queue
    ones included) change which worker runs a task, never a reduction order."""
    cfg, inputs, ref = case(ep=3, mixed_queues=True, tokens=96, routing="skewed", dtype="bf16")
    _, raw_static = run_threads(cfg, inputs)
    pooled = cfg.replace(claim_pool=True)
    assert pooled.pool_claimers == pooled.num_aic + pooled.num_aiv
    out, raw_pooled = run_threads(pooled, inputs)
    assert_close(out, ref, "bf16")
    for name in raw_static:
        assert np.array_equal(raw_static[name], raw_pooled[name]), name


def test_tolerance_table_is_ordered():
    assert TOLERANCE["fp32"] < TOLERANCE["fp16"] < TOLERANCE["bf16"]


def test_run_moe_entry_point_on_numpy_arrays():
    from hpmoe.runtime import run_moe

    cfg, inputs, ref = case(ep=3, dtype="bf16")
    out = run_moe(cfg, inputs.x, inputs.w1, inputs.w2, inputs.topk_ids, inputs.topk_weights, inputs.dy)
    assert_close(out, ref, "bf16")
