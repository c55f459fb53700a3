"""The CUDA backend with weights in nn.Linear's layout (weights_transposed) and with column-split GMM tasks
(gmm_n_block), activation tasks (act_n_block) and weight-gradient tasks (wgrad_n_block), on a GPU: every
output against float64 (bf16 and fp16, ragged rows, empty experts, top-1 to top-8), bitwise repeatable, the
transposed layout against the standard one, split against unsplit, and the tuner's measuring path. Skips
with the reason when the library or a GPU is missing."""
from __future__ import annotations

import numpy as np
import pytest

from hpmoe.act_split import act_n_block
from hpmoe.config import make_config
from hpmoe.cuda.native import gpu_count, gpu_unavailable_reason
from hpmoe.reference import moe_reference
from hpmoe.runtime.routing import bucket_for, make_routing
from hpmoe.runtime.tolerances import compare
from hpmoe.runtime.twin import make_inputs
from hpmoe.ssc_format import Slot

GPUS = gpu_count()
needs_gpu = pytest.mark.skipif(GPUS == 0, reason=gpu_unavailable_reason() or "no GPU")

# Several 128-row tiles, N and K past one 128 x 256 tile and not multiples of it, expert boundaries inside
# tiles; column blocks of 256 (one tile) and 264 (a block edge inside a tile, 16-byte aligned).
BASE = dict(tokens=256, hidden=520, inter=392, experts_per_rank=4, tile_m=128, wgrad_tile=8, token_tile=64,
            num_aic=8, num_aiv=4, mixed_queues=True)


def config(ep: int, dtype: str, routing: str, topk: int, seed: int = 0, **over):
    cfg = make_config(None, {**BASE, "ep": ep, "dtype": dtype, "topk": topk, **over})
    ids, weights = make_routing(cfg, routing, seed)
    cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, ids))
    return cfg, make_inputs(cfg, ids, weights, seed)


def run_group(cfg, inputs, iterations: int = 1):
    from hpmoe.cuda.group import CudaGroup
    with CudaGroup(cfg, [r % max(GPUS, 1) for r in range(cfg.ep)]) as g:
        g.load_inputs(inputs)
        raws = []
        for _ in range(iterations):
            g.run("fwd", timeout_s=20)
            g.run("bwd", timeout_s=20)
            raws.append(g.raw_outputs())
        return g.outputs(), raws


def check(cfg, inputs, outputs, label):
    ref = moe_reference(inputs.x, inputs.w1, inputs.w2, inputs.topk_ids, inputs.topk_weights, inputs.dy)
    bad = [f"{n}: {e:.3e} > {t:.1e}" for n, e, t, ok in compare(outputs, ref, cfg.dtype) if not ok]
    assert not bad, f"{label}: " + "; ".join(bad)


def first_difference(a: dict, b: dict) -> str:
    for name in a:
        x = np.ascontiguousarray(a[name]).reshape(-1).view(np.uint8)  # weights may come back as transposed views
        y = np.ascontiguousarray(b[name]).reshape(-1).view(np.uint8)
        if not np.array_equal(x, y):
            return f"{name} first differs at byte {int(np.flatnonzero(x != y)[0])}"
    return ""


@needs_gpu
@pytest.mark.parametrize("ep", [1, 2])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("routing,topk", [("balanced", 1), ("skewed", 2), ("empty", 4), ("balanced", 8)])
@pytest.mark.parametrize("over", [dict(weights_transposed=True), dict(gmm_n_block=256),
                                  dict(gmm_n_block=264, weights_transposed=True),
                                  dict(gmm_n_block=256, weights_transposed=True, row_pipelines=True,
                                       claim_pool=True)])
def test_outputs_match_float64_reference(ep, dtype, routing, topk, over):
    experts = ep * BASE["experts_per_rank"]
    if topk > experts or (routing == "empty" and 2 * topk > experts):
        pytest.skip(f"routing {routing!r} with top-{topk} needs more than {experts} experts (EP {ep})")
    cfg, inputs = config(ep, dtype, routing, topk, **over)
    outputs, raws = run_group(cfg, inputs, iterations=2)
    label = f"{ep=} {dtype=} {routing=} {topk=} {over=}"
    check(cfg, inputs, outputs, label)
    assert not first_difference(raws[0], raws[1]), f"{label}: {first_difference(raws[0], raws[1])}"


@needs_gpu
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_layouts_and_splits_against_the_standard_schedule(dtype):
    """Reported, not all required: the forward and activation gradients read the same products in the same K
    order in every case; the weight gradient's tile is the transposed one (wgmma may sum it otherwise)."""
    cfg, inputs = config(2, dtype, "skewed", 3, seed=4)
    _, std = run_group(cfg, inputs)
    _, split = run_group(cfg.replace(gmm_n_block=256), inputs)
    _, wt = run_group(cfg.replace(weights_transposed=True), inputs)
    assert not first_difference(std[0], split[0]), f"split vs whole width: {first_difference(std[0], split[0])}"
    for name in ("y", "dx", "dtopk_weights"):
        assert np.array_equal(std[0][name], wt[0][name]), f"transposed {name}"
    same = {n: np.array_equal(std[0][n], wt[0][n]) for n in ("dw1", "dw2")}
    print(f"{dtype}: transposed weight gradients bitwise equal to the standard layout's: {same}")


def run_with_activations(cfg, inputs):
    """(outputs as float64, stored bits of every output and of A and dH per rank) after one fwd + bwd."""
    from hpmoe.cuda.group import CudaGroup
    with CudaGroup(cfg, [r % max(GPUS, 1) for r in range(cfg.ep)]) as g:
        g.load_inputs(inputs)
        g.run("fwd", timeout_s=20)
        g.run("bwd", timeout_s=20)
        bits = g.raw_outputs()
        for slot in (Slot.A, Slot.DH):
            bits[slot.name] = np.stack([g.read(r, slot) for r in range(cfg.ep)])
        return g.outputs(), bits


@needs_gpu
@pytest.mark.parametrize("ep", [1, 2])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("routing,topk", [("balanced", 1), ("skewed", 2), ("empty", 4), ("balanced", 8)])
@pytest.mark.parametrize("over", [dict(gmm_n_block=256, act_n_block=256),
                                  dict(gmm_n_block=256, act_n_block=256, claim_pool=True),
                                  dict(gmm_n_block=264, act_n_block=264, weights_transposed=True),
                                  dict(gmm_n_block=128, act_n_block=256, claim_pool=True)])
def test_split_activation_is_bitwise_the_whole_rows(ep, dtype, routing, topk, over):
    """SwiGLU and its gradient in column blocks (act_split.py; I = 392: blocks of 256 + 136, 264 + 128)
    against float64, and bit for bit the same schedule with whole-row activation tasks, A and dH included."""
    experts = ep * BASE["experts_per_rank"]
    if topk > experts or (routing == "empty" and 2 * topk > experts):
        pytest.skip(f"routing {routing!r} with top-{topk} needs more than {experts} experts (EP {ep})")
    cfg, inputs = config(ep, dtype, routing, topk, **over)
    label = f"{ep=} {dtype=} {routing=} {topk=} {over=}"
    assert act_n_block(cfg), f"{label}: the case must split"
    outputs, split = run_with_activations(cfg, inputs)
    check(cfg, inputs, outputs, label)
    _, whole = run_with_activations(cfg.replace(act_n_block=cfg.inter), inputs)
    assert not first_difference(whole, split), f"{label}: split vs whole rows: {first_difference(whole, split)}"


@needs_gpu
@pytest.mark.parametrize("ep", [1, 2])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("routing,topk", [("balanced", 1), ("skewed", 2), ("empty", 4), ("balanced", 8)])
@pytest.mark.parametrize("over", [dict(wgrad_n_block=264, claim_pool=True),
                                  dict(wgrad_n_block=256, weights_transposed=True, claim_pool=True),
                                  dict(wgrad_n_block=136, row_pipelines=True, claim_pool=True)])
def test_split_weight_gradient_is_bitwise_the_whole_width(ep, dtype, routing, topk, over):
    """Weight-gradient tasks in column blocks (wgrad_split.py; h = 520, 2I = 784: blocks of 264 end inside a
    tile) against float64, and bit for bit the same schedule with whole-width weight-gradient tasks: each
    output tile sums the same products in the same K order whichever unit holds it."""
    experts = ep * BASE["experts_per_rank"]
    if topk > experts or (routing == "empty" and 2 * topk > experts):
        pytest.skip(f"routing {routing!r} with top-{topk} needs more than {experts} experts (EP {ep})")
    cfg, inputs = config(ep, dtype, routing, topk, **over)
    label = f"{ep=} {dtype=} {routing=} {topk=} {over=}"
    outputs, split = run_group(cfg, inputs)
    check(cfg, inputs, outputs, label)
    _, whole = run_group(cfg.replace(wgrad_n_block=0), inputs)
    assert not first_difference(whole[0], split[0]), f"{label}: split vs whole: {first_difference(whole[0], split[0])}"


@needs_gpu
def test_tuner_measures_and_caches(tmp_path):
    from hpmoe import tuning_cache
    from hpmoe.cuda.tune import gpu_name, measure_on_gpu, tune_cuda
    cfg, _ = config(1, "bf16", "balanced", 2)
    space = {"variant": ("mixed", "mixed+pool"), "workers": ("8+4", "10+2"), "tile_m": (128,),
             "gmm_n_block": (0, 256)}
    res = tune_cuda(cfg, lambda c: measure_on_gpu(c, [0], iterations=2), space=space, rounds=1)
    assert res.best.ms > 0 and not res.best.skipped
    path = tuning_cache.store(tuning_cache.shape_key(cfg), gpu_name(0), res.best_cfg, res.best.ms,
                              tmp_path / "t.json")
    assert tuning_cache.lookup(tuning_cache.shape_key(cfg), gpu_name(0), path) is not None
