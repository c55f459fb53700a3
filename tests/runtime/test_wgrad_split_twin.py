"""The CPU twin with weight-gradient tasks split into column blocks (wgrad_split.py): dW1, dW2 and every other
output against float64 (bf16, fp16 and fp32; top-1 to top-8; empty experts; a block that does not divide the
width; nn.Linear's layout), and bitwise equal to the same schedule with whole-width weight-gradient tasks (each
output element sums the same products in the same order: a split must not change one bit)."""
from __future__ import annotations

import pytest

from hpmoe.wgrad_split import wgrad_n_block

from runtime_helpers import case
from test_act_split_twin import assert_split_matches_float64_and_whole


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("routing,topk", [("random", 1), ("skewed", 2), ("empty", 2), ("random", 8)])
@pytest.mark.parametrize("split", [dict(wgrad_n_block=24, mixed_queues=True, claim_pool=True),
                                   dict(wgrad_n_block=16, mixed_queues=True, row_pipelines=True, claim_pool=True),
                                   dict(wgrad_n_block=8, mixed_queues=True, claim_pool=True,
                                        weights_transposed=True, gmm_n_block=16)])
def test_split_is_bitwise_the_whole_width_and_matches_float64(dtype, routing, topk, split):
    cfg, inputs, ref = case(routing, seed=topk, dtype=dtype, topk=topk, **split)
    label = f"{dtype=} {routing=} {topk=} {split=}"
    assert wgrad_n_block(cfg), f"{label}: the case must split"
    whole_cfg = cfg.replace(wgrad_n_block=0)
    assert wgrad_n_block(whole_cfg) == 0
    assert_split_matches_float64_and_whole(cfg, whole_cfg, inputs, ref, label)
