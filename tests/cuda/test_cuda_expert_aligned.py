"""Expert-aligned receive slots (expert_aligned, kConfigExpertAligned) on the CUDA backend: every output
against float64 (bf16 and fp16, ragged rows, empty experts, top-1 to top-8) under each schedule variant,
bitwise repeatable, and bitwise equal to the unaligned layout (a row's products and K order do not depend on
where in its tile the row sits); MoEFFN with and without it. Skips with the reason when the library or a
GPU is missing."""
from __future__ import annotations

import pytest

from test_cuda_layouts import GPUS, check, config, first_difference, needs_gpu, run_group

# BASE's 4 local experts on 128-row tiles, plus 16 for many experts with rows of a tile or less each.
VARIANTS = [dict(), dict(row_pipelines=True, claim_pool=True), dict(gmm_n_block=256, claim_pool=True),
            dict(weights_transposed=True, row_pipelines=True, claim_pool=True),
            dict(fuse_swiglu=True, inter=384, act_n_block=128)]


@needs_gpu
@pytest.mark.parametrize("ep", [1, 2])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("routing,topk,experts", [("balanced", 1, 4), ("skewed", 2, 4), ("empty", 4, 4),
                                                  ("balanced", 8, 16), ("skewed", 3, 16)])
@pytest.mark.parametrize("over", VARIANTS)
def test_aligned_matches_float64_and_the_unaligned_bits(ep, dtype, routing, topk, experts, over):
    if topk > ep * experts or (routing == "empty" and 2 * topk > ep * experts):
        pytest.skip(f"routing {routing!r} with top-{topk} needs more than {ep * experts} experts (EP {ep})")
    label = f"{ep=} {dtype=} {routing=} {topk=} {experts=} {over=}"
    cfg, inputs = config(ep, dtype, routing, topk, experts_per_rank=experts, expert_aligned=True, **over)
    outputs, raws = run_group(cfg, inputs, iterations=2)
    check(cfg, inputs, outputs, label)
    assert not first_difference(raws[0], raws[1]), f"repeat, {label}: {first_difference(raws[0], raws[1])}"
    plain, plain_inputs = config(ep, dtype, routing, topk, experts_per_rank=experts, **over)
    _, plain_raws = run_group(plain, plain_inputs)
    assert not first_difference(plain_raws[0], raws[0]), \
        f"aligned vs unaligned, {label}: {first_difference(plain_raws[0], raws[0])}"


@needs_gpu
@pytest.mark.parametrize("experts,k", [(16, 4), (4, 2)])
def test_moeffn_aligned_equals_unaligned_bitwise(experts, k):
    from test_torch_moeffn import assert_variants_bitwise_equal
    assert_variants_bitwise_equal(700, 256, 384, experts, k, [dict(expert_aligned=False), dict(expert_aligned=True)])
