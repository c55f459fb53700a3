"""GMM2 and the gate gradient as chains of K chunks (gmm_k_block, runtime/k_chunks.h) on the CUDA backend: every
output against float64 (bf16 and fp16, ragged rows, empty experts, top-1 to top-8, EP 1 and 2, both weight
layouts), bitwise repeatable, and close to K whole (each chunk's product is added to the running sum once, in
fp32: BlockGemm::AddSum). MoEFFN with gmm_k_block: float64, and two modules bitwise equal. Skips with the reason
when the library or a GPU is missing."""
from __future__ import annotations

import pytest

from test_cuda_layouts import check, config, first_difference, needs_gpu, run_group

CHUNKED = dict(mixed_queues=True, claim_pool=True, first_gmm_pool=True, inter=384, gmm_n_block=256)
# K 2I = 768 in 3 chunks of 256, GMM2's K = I = 384 in 256 + 128; chunks of one K step; a chunk past both Ks
VARIANTS = [dict(gmm_k_block=256), dict(gmm_k_block=64, weights_transposed=True),
            dict(gmm_k_block=256, expert_aligned=True), dict(gmm_k_block=512)]


@needs_gpu
@pytest.mark.parametrize("ep", [1, 2])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("routing,topk,experts", [("balanced", 1, 4), ("skewed", 2, 4), ("empty", 2, 4),
                                                  ("balanced", 8, 16)])
@pytest.mark.parametrize("over", VARIANTS)
def test_k_chunks_match_float64_and_repeat_bitwise(ep, dtype, routing, topk, experts, over):
    label = f"{ep=} {dtype=} {routing=} {topk=} {experts=} {over=}"
    cfg, inputs = config(ep, dtype, routing, topk, experts_per_rank=experts, **CHUNKED, **over)
    outputs, raws = run_group(cfg, inputs, iterations=2)
    check(cfg, inputs, outputs, label)
    assert not first_difference(raws[0], raws[1]), f"repeat, {label}: {first_difference(raws[0], raws[1])}"


@needs_gpu
def test_moeffn_k_chunks_match_float64_and_repeat_bitwise():
    from test_torch_moeffn import assert_variants_bitwise_equal
    T = 700  # 11 busy row tiles (4 experts, top-2, h 256, I 384) for 8 + 4 blocks: mixed queues, pooled

    def chunked(m, variant):
        cfg = m.runtime.config(T)
        assert cfg.gmm_k_block == variant.get("gmm_k_block", 0), cfg

    assert_variants_bitwise_equal(T, 256, 384, 4, 2, [dict(gmm_k_block=256), dict(gmm_k_block=256)], chunked)
