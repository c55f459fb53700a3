"""SwiGLU fused into the GMM tiles on a GPU (fuse_swiglu: GMM_SWIGLU, GMM_SWIGLU_GRAD; handlers_fused.cuh):
every output against float64 (bf16 and fp16, EP 1 and 2, top-1 to top-8, skewed and empty experts, both weight
layouts, column-split and whole-width tasks, the queue variants), bitwise repeatable, and bit for bit the
unfused schedule (the fused epilogues round H and dA as the unfused tasks store them and share their
per-element arithmetic, swiglu_math.cuh), A and dH included. Skips with the reason without a GPU."""
from __future__ import annotations

import pytest

from test_cuda_layouts import BASE, check, config, first_difference, needs_gpu, run_group, run_with_activations

# I = 384: three groups of 128; the backward's 256-column dA tiles end one group short of a whole tile.
FUSED = dict(inter=384, fuse_swiglu=True)


@needs_gpu
@pytest.mark.parametrize("ep", [1, 2])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("routing,topk", [("balanced", 1), ("skewed", 2), ("empty", 4), ("balanced", 8)])
@pytest.mark.parametrize("over", [dict(claim_pool=True), dict(gmm_n_block=256, claim_pool=True),
                                  dict(gmm_n_block=256, weights_transposed=True, claim_pool=True),
                                  dict(row_pipelines=True, claim_pool=True, weights_transposed=True),
                                  dict(act_n_block=128, wgrad_n_block=136, claim_pool=True)])
def test_fused_matches_float64_and_is_bitwise_the_unfused_schedule(ep, dtype, routing, topk, over):
    experts = ep * BASE["experts_per_rank"]
    if topk > experts or (routing == "empty" and 2 * topk > experts):
        pytest.skip(f"routing {routing!r} with top-{topk} needs more than {experts} experts (EP {ep})")
    cfg, inputs = config(ep, dtype, routing, topk, **FUSED, **over)
    label = f"{ep=} {dtype=} {routing=} {topk=} {over=}"
    outputs, fused = run_with_activations(cfg, inputs)
    check(cfg, inputs, outputs, label)
    _, again = run_group(cfg, inputs)
    assert not first_difference({k: fused[k] for k in again[0]}, again[0]), f"{label}: not repeatable"
    _, plain = run_with_activations(cfg.replace(fuse_swiglu=False, act_n_block=0), inputs)
    assert not first_difference(plain, fused), f"{label}: fused vs unfused: {first_difference(plain, fused)}"
