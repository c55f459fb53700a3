"""Passes of the speculative bucket (docs/design.md, "Routing beyond the bucket") on the CPU twin, as the CUDA
backend runs them after a forward that overflowed: each pass routes a token range whose rows fit a bucket the
whole routing does not, then runs its forward and its backward. y, dx and d topk_weights are bitwise those of
one launch in a bucket that holds the routing (a token's rows are computed the same way whatever else is in
its tile); the weight gradients are the sum of the passes' (another summation order), checked against float64.

Tolerances: hpmoe.runtime.tolerances (10 unit roundoffs of the dtype); the passes' weight gradients are summed
here in float64 from fp32 outputs, inside that budget."""
from __future__ import annotations

import numpy as np
import pytest

from hpmoe.runtime.tolerances import compare
from hpmoe.runtime.twin import CpuTwin
from hpmoe.speculative_bucket import least_rows, pass_ranges
from hpmoe.ssc_format import Slot

from runtime_helpers import case


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("ep,topk", [(1, 2), (2, 3)])
def test_passes_give_one_launch_rows_bitwise_and_weight_gradients_by_their_sum(ep, topk, aligned):
    cfg, inputs, ref = case("skewed", seed=4, dtype="bf16", ep=ep, topk=topk, tokens=96, expert_aligned=aligned)
    with CpuTwin(cfg, timeout_s=10.0) as twin:  # one launch per direction in a bucket that holds the routing
        twin.load_inputs(inputs)
        twin.run_threads("fwd")
        twin.run_threads("bwd")
        whole = twin.raw_outputs()
    small = cfg.replace(recv_rows_per_src=max(least_rows(cfg), cfg.recv_rows_per_src // 2 // cfg.tile_m * cfg.tile_m))
    ranges = pass_ranges(small, small.recv_rows_per_src)
    assert len(ranges) >= 2, ranges
    dw = {"dw1": 0.0, "dw2": 0.0}
    with CpuTwin(small, timeout_s=10.0) as twin:
        for tokens in ranges:
            twin.load_inputs(inputs, tokens=tokens)
            twin.run_threads("fwd", tokens=tokens)
            twin.run_threads("bwd", tokens=tokens)
            for name in dw:  # each pass writes its own partial weight gradient
                dw[name] = dw[name] + twin.outputs()[name]
        passes, last = twin.raw_outputs(), twin.outputs()
    for name in ("y", "dx", "dtopk_weights"):  # every pass wrote its tokens' rows
        assert np.array_equal(passes[name], whole[name]), f"{name}: the passes differ from one launch"
    got = {**{n: last[n] for n in ("y", "dx", "dtopk_weights")}, **dw}
    bad = [f"{n}: {e:.3e} > {tol:.1e}" for n, e, tol, ok in compare(got, ref, "bf16") if not ok]
    assert not bad, "; ".join(bad)


def test_a_pass_writes_only_its_tokens():
    """Rows of y outside the pass's tokens keep what they held (here: NaN)."""
    cfg, inputs, _ = case("random", seed=2, dtype="bf16", ep=2, topk=2, tokens=64)
    with CpuTwin(cfg, timeout_s=10.0) as twin:
        twin.load_inputs(inputs, tokens=(16, 40))
        for r in range(cfg.ep):
            twin.heap.view(r, Slot.Y)[...] = 0x7FC0  # bf16 NaN bits
        twin.run_threads("fwd", tokens=(16, 40))
        y = twin.raw_outputs()["y"]
    nan = np.uint16(0x7FC0)
    assert (y[:, :16] == nan).all() and (y[:, 40:] == nan).all()
    assert not (y[:, 16:40] == nan).any()
