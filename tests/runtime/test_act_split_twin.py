"""The CPU twin with SwiGLU and SwiGLU-grad split into column blocks (act_split.py): every output against float64
(bf16 and fp16, top-1 to top-8, I not a multiple of the block, empty experts), and bitwise equal to the same
schedule with whole-row activation tasks (SwiGLU is elementwise: a split must not change one bit), including
the saved activation A and the activation gradient dH themselves. The AscendC kernel refuses split SSCs."""
from __future__ import annotations

import numpy as np
import pytest

from hpmoe.act_split import act_n_block
from hpmoe.runtime.tolerances import compare
from hpmoe.runtime.twin import CpuTwin
from hpmoe.ssc_format import Slot

from runtime_helpers import case

RAGGED = dict(inter=40, wgrad_tile=8)  # I = 40: blocks of 16 leave one of 8; GMM1 blocks straddle the gate/up seam


def run_bits(cfg, inputs) -> dict[str, np.ndarray]:
    """Stored bits of every output, and of A and dH on every rank, after one forward and one backward."""
    with CpuTwin(cfg, timeout_s=10.0) as twin:
        twin.load_inputs(inputs)
        twin.run_threads("fwd")
        twin.run_threads("bwd")
        bits = twin.raw_outputs()
        for slot in (Slot.A, Slot.DH):
            bits[slot.name] = np.stack([twin.heap.view(r, slot).copy() for r in range(cfg.ep)])
        return bits, twin.outputs()


def first_difference(a: dict, b: dict) -> str:
    for name in a:
        x, y = a[name].reshape(-1).view(np.uint8), b[name].reshape(-1).view(np.uint8)
        if not np.array_equal(x, y):
            return f"{name} first differs at byte {int(np.flatnonzero(x != y)[0])}"
    return ""


def assert_split_matches_float64_and_whole(cfg, whole_cfg, inputs, ref, label: str) -> None:
    """cfg's outputs against the float64 reference, and its stored bits (outputs, A, dH) equal to whole_cfg's,
    the same schedule without the split."""
    bits, out = run_bits(cfg, inputs)
    bad = [f"{name}: {err:.3e} > {tol:.1e}" for name, err, tol, ok in compare(out, ref, cfg.dtype) if not ok]
    assert not bad, f"{label}: " + "; ".join(bad)
    whole, _ = run_bits(whole_cfg, inputs)
    assert not first_difference(whole, bits), f"{label}: split vs unsplit: {first_difference(whole, bits)}"


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("routing,topk", [("random", 1), ("skewed", 2), ("empty", 2), ("random", 8)])
@pytest.mark.parametrize("split", [dict(gmm_n_block=16, act_n_block=16, mixed_queues=True, claim_pool=True),
                                   dict(RAGGED, gmm_n_block=16, act_n_block=16, mixed_queues=True),
                                   dict(RAGGED, act_n_block=24, weights_transposed=True)])
def test_split_is_bitwise_the_whole_rows_and_matches_float64(dtype, routing, topk, split):
    cfg, inputs, ref = case(routing, seed=topk, dtype=dtype, topk=topk, **split)
    label = f"{dtype=} {routing=} {topk=} {split=}"
    assert act_n_block(cfg), f"{label}: the case must split"
    # The same GMM split, whole-row SwiGLU.
    assert_split_matches_float64_and_whole(cfg, cfg.replace(act_n_block=cfg.inter), inputs, ref, label)


@pytest.mark.parametrize("variant", [dict(row_pipelines=True, claim_pool=True), dict(claim_pool=True),
                                     dict(num_aic=3, num_aiv=1)])
def test_split_under_queue_variants(variant):
    """Which worker runs a block changes, its arithmetic does not."""
    cfg, inputs, _ = case("skewed", seed=7, dtype="bf16", topk=3, gmm_n_block=8, act_n_block=16,
                          mixed_queues=True, **variant)
    bits, _ = run_bits(cfg, inputs)
    whole, _ = run_bits(cfg.replace(act_n_block=cfg.inter), inputs)
    assert not first_difference(whole, bits), f"{variant=}: {first_difference(whole, bits)}"


def test_ascendc_kernel_refuses_in_one_line():
    from hpmoe.runtime.native import RuntimeFailure
    cfg, inputs, _ = case(dtype="bf16", num_aiv=4, act_n_block=16)
    with pytest.raises(RuntimeFailure, match="splits SwiGLU into column blocks") as err:
        with CpuTwin(cfg, backend="ascendc-cpu") as twin:
            twin.load_inputs(inputs)
            twin.run_threads("fwd")
    assert "\n" not in str(err.value)
