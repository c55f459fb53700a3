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
    from test_torch_moeffn import assert_variants_bitwise_equal
    T = 700  # 11 busy row tiles (4 experts, top-2, h 256, I 384) for 8 + 4 blocks: mixed queues

    def pooled_by_default(m, variant):
        cfg = m.runtime.config(T)
        assert not cfg.row_pipelines and cfg.first_gmm_pool == variant.get("first_gmm_pool", True), cfg

    assert_variants_bitwise_equal(T, 256, 384, 4, 2, [dict(), dict(first_gmm_pool=False)], pooled_by_default)


@needs_gpu
def test_a_tuned_entry_from_before_the_field_keeps_its_schedule(tmp_path, monkeypatch):
    import json

    import torch

    from hpmoe.torch import MoEFFN
    from hpmoe.tuning_cache import shape_key
    T = 700
    m = MoEFFN(256, 384, 4, 2, num_aic=8, num_aiv=4)
    assert m.runtime.config(T).first_gmm_pool
    old = {"tile_m": 128, "gmm_n_block": 0, "wgrad_n_block": 0, "wgrad_tile": 8, "token_tile": 64, "num_aic": 10,
           "num_aiv": 2, "mixed_queues": True, "row_pipelines": True, "claim_pool": True}  # no first_gmm_pool
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps({"version": 1, "entries": {torch.cuda.get_device_name(): {
        shape_key(m.runtime.config(T)): {"schedule": old, "fwd_bwd_ms": 1.0}}}}))
    monkeypatch.setenv("HPMOE_TUNING_CACHE", str(path))
    cfg = MoEFFN(256, 384, 4, 2, num_aic=8, num_aiv=4).runtime.config(T)
    assert cfg.row_pipelines and not cfg.first_gmm_pool and cfg.num_aic == 10, cfg
