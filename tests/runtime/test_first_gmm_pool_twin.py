"""The first GMM of each direction and its SwiGLU step claimed from the pool in panel order (cfg.first_gmm_pool,
worker_queues._first_stage) on the CPU twin: every output against float64, and bitwise equal to the same
schedule with those tasks dealt statically (the order of claims changes who computes a tile, never how)."""
from __future__ import annotations

import numpy as np
import pytest

from hpmoe.runtime.tolerances import compare
from hpmoe.runtime.twin import CpuTwin

from runtime_helpers import case

POOLED = dict(mixed_queues=True, claim_pool=True, row_pipelines=False)


def run_bits(cfg, inputs):
    with CpuTwin(cfg, timeout_s=10.0) as twin:
        twin.load_inputs(inputs)
        twin.run_threads("fwd")
        twin.run_threads("bwd")
        return twin.raw_outputs(), twin.outputs()


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("routing,topk,ep", [("random", 1, 1), ("skewed", 2, 2), ("empty", 2, 2), ("random", 6, 3)])
@pytest.mark.parametrize("extra", [dict(gmm_n_block=16), dict(gmm_n_block=8, act_n_block=16, weights_transposed=True),
                                   dict(fuse_swiglu=True, inter=256, gmm_n_block=256, wgrad_tile=8)])
def test_pooled_first_gmm_matches_float64_and_the_static_deal(dtype, routing, topk, ep, extra):
    cfg, inputs, ref = case(routing, seed=topk, dtype=dtype, topk=topk, ep=ep, first_gmm_pool=True, **POOLED, **extra)
    label = f"{dtype=} {routing=} {topk=} {ep=} {extra=}"
    bits, out = run_bits(cfg, inputs)
    bad = [f"{name}: {err:.3e} > {tol:.1e}" for name, err, tol, ok in compare(out, ref, cfg.dtype) if not ok]
    assert not bad, f"{label}: " + "; ".join(bad)
    static, _ = run_bits(cfg.replace(first_gmm_pool=False), inputs)
    for name, value in static.items():
        assert np.array_equal(value.view(np.uint8), bits[name].view(np.uint8)), f"{label}: {name} differs bitwise"
