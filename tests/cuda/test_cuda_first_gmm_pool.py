"""The first GMM of each direction and its SwiGLU step claimed from the pool in panel order (first_gmm_pool,
worker_queues._first_stage) on the CUDA backend: every output against float64 (bf16 and fp16, ragged rows,
empty experts, top-1 to top-8, EP 1 and 2), bitwise repeatable, and bitwise equal to the static deal (claims
change which block computes a tile, never its products or K order); MoEFFN, whose default it is under mixed
queues, with and without it. Skips with the reason when the library or a GPU is missing."""
from __future__ import annotations

import pytest

from test_cuda_layouts import check, config, first_difference, needs_gpu, run_group

POOLED = dict(claim_pool=True, first_gmm_pool=True)
VARIANTS = [dict(gmm_n_block=256), dict(gmm_n_block=128, act_n_block=256, weights_transposed=True),
            dict(gmm_n_block=256, expert_aligned=True), dict(fuse_swiglu=True, inter=384, act_n_block=128)]


@needs_gpu
@pytest.mark.parametrize("ep", [1, 2])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("routing,topk,experts", [("balanced", 1, 4), ("skewed", 2, 4), ("empty", 2, 4),
                                                  ("balanced", 8, 16)])
@pytest.mark.parametrize("over", VARIANTS)
def test_pooled_first_gmm_matches_float64_and_the_static_deal(ep, dtype, routing, topk, experts, over):
    label = f"{ep=} {dtype=} {routing=} {topk=} {experts=} {over=}"
    cfg, inputs = config(ep, dtype, routing, topk, experts_per_rank=experts, **POOLED, **over)
    outputs, raws = run_group(cfg, inputs, iterations=2)
    check(cfg, inputs, outputs, label)
    assert not first_difference(raws[0], raws[1]), f"repeat, {label}: {first_difference(raws[0], raws[1])}"
    _, static_raws = run_group(cfg.replace(first_gmm_pool=False), inputs)
    assert not first_difference(static_raws[0], raws[0]), \
        f"pooled vs static first GMM, {label}: {first_difference(static_raws[0], raws[0])}"


@needs_gpu
def test_moeffn_pooled_first_gmm_is_its_default_and_equals_the_static_deal():
    import torch

    from hpmoe.torch import MoEFFN
    from test_torch_moeffn import check_against_float64, f64, routing, step
    T, h, inter, experts, k = 700, 256, 384, 4, 2  # 11 busy row tiles for 8 + 4 blocks: mixed queues
    ids, w = routing(T, experts, k, 5)
    x0 = torch.randn(T, h, device="cuda").bfloat16()
    dy = torch.randn(T, h, device="cuda").bfloat16()
    results = []
    for pooled in (None, False):
        m = MoEFFN(h, inter, experts, k, num_aic=8, num_aiv=4, first_gmm_pool=pooled)
        cfg = m.runtime.config(T)
        assert cfg.first_gmm_pool == (pooled is None) and not cfg.row_pipelines, cfg
        torch.manual_seed(0)
        with torch.no_grad():
            m.w1.copy_(torch.randn_like(m.w1, dtype=torch.float32).mul_(h ** -0.5))
            m.w2.copy_(torch.randn_like(m.w2, dtype=torch.float32).mul_(inter ** -0.5))
        x = x0.clone().requires_grad_()
        wt = w.detach().clone().requires_grad_()
        y = step(m, x, ids, wt, dy)
        got = {"y": y, "dx": x.grad, "dw1": m.w1.grad, "dw2": m.w2.grad, "dtopk_weights": wt.grad}
        check_against_float64(x, m.w1, m.w2, ids, wt, dy, {n: f64(v) for n, v in got.items()}, torch.bfloat16)
        results.append({n: v.detach().clone() for n, v in got.items()})
    for name in results[0]:
        assert torch.equal(results[0][name], results[1][name]), f"{name}: pooled first GMM differs from static"
