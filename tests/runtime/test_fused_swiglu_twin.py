"""The CPU twin with SwiGLU fused into the GMM tiles (cfg.fuse_swiglu: GMM_SWIGLU, GMM_SWIGLU_GRAD): every
output against float64 (bf16 and fp16, top-1 to top-8, skewed and empty experts, both weight layouts, the
schedule variants), bitwise repeatable, and H (stored with gate and up interleaved in groups of 128 columns)
equal to the unfused H in that order, to the rounding of one GEMM element. Not bitwise the unfused path on the
CPU: the twin's GEMM (Eigen) blocks its reduction by the width of the call, and a fused task multiplies gate and
up columns in calls of another width. The GPU tile sums every element in one K order whatever its column, so
there the fused path is checked bitwise against the unfused one (tests/cuda/test_cuda_fused_swiglu.py)."""
from __future__ import annotations

import numpy as np
import pytest

from hpmoe.errors import ConfigError
from hpmoe.runtime.tolerances import compare
from hpmoe.runtime.twin import CpuTwin
from hpmoe.ssc_format import FUSED_SWIGLU_GROUP, Slot

from runtime_helpers import case
from test_act_split_twin import first_difference, run_bits

SHAPE = dict(hidden=64, inter=256, wgrad_tile=16)  # I = 2 groups of 128


def h_bits(cfg, inputs) -> np.ndarray:
    """H as stored on every rank after one forward."""
    with CpuTwin(cfg, timeout_s=10.0) as twin:
        twin.load_inputs(inputs)
        twin.run_threads("fwd")
        return np.stack([twin.heap.view(r, Slot.H).copy() for r in range(cfg.ep)])


def interleave(h: np.ndarray, inter: int) -> np.ndarray:
    """The unfused H ([gate | up]) in the fused column order."""
    g = FUSED_SWIGLU_GROUP
    gate, up = h[..., :inter], h[..., inter:]
    parts = []
    for q in range(0, inter, g):
        parts += [gate[..., q:q + g], up[..., q:q + g]]
    return np.concatenate(parts, axis=-1)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("routing,topk", [("random", 1), ("skewed", 2), ("empty", 2), ("random", 8)])
@pytest.mark.parametrize("variant", [dict(claim_pool=True), dict(row_pipelines=True, claim_pool=True),
                                     dict(claim_pool=True, weights_transposed=True, gmm_n_block=256,
                                          wgrad_n_block=64),
                                     dict(act_n_block=128)])
def test_fused_matches_float64_and_stores_the_unfused_h(dtype, routing, topk, variant):
    cfg, inputs, ref = case(routing, seed=topk, dtype=dtype, topk=topk, mixed_queues=True, fuse_swiglu=True,
                            **SHAPE, **variant)
    label = f"{dtype=} {routing=} {topk=} {variant=}"
    bits, out = run_bits(cfg, inputs)
    bad = [f"{name}: {err:.3e} > {tol:.1e}" for name, err, tol, ok in compare(out, ref, cfg.dtype) if not ok]
    assert not bad, f"{label}: " + "; ".join(bad)
    assert not first_difference(bits, run_bits(cfg, inputs)[0]), f"{label}: not repeatable"
    h_plain = interleave(h_bits(cfg.replace(fuse_swiglu=False, act_n_block=0), inputs), cfg.inter).astype(np.float64)
    h_fused = h_bits(cfg, inputs).astype(np.float64)
    # Tolerance: one rounding of the stored dtype (2^-8 bf16, 2^-11 fp16) relative to the largest |H|, since the
    # two GEMM calls may round an element's fp32 sum differently before it is stored.
    ulp = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}[dtype]
    err = np.abs(h_fused - h_plain).max() / max(np.abs(h_plain).max(), 1e-30)
    assert err <= ulp, f"{label}: H differs from the unfused H by {err:.2e} (> {ulp:.1e})"


@pytest.mark.parametrize("fields,message", [
    (dict(mixed_queues=False), "fuse_swiglu needs mixed_queues"),
    (dict(inter=200, wgrad_tile=8), "multiple of 128"),
    (dict(act_n_block=64), "act_n_block=64 is not a multiple of 128"),
])
def test_bad_fused_configs_are_refused_in_one_line(fields, message):
    with pytest.raises(ConfigError, match=message):
        case(dtype="bf16", fuse_swiglu=True, **{**SHAPE, "mixed_queues": True, **fields})
