"""The AscendC kernel, compiled against the project's stubs and run on CPU threads (--backend ascendc-cpu):
forward + backward against the float64 reference, and bit for bit against the CPU twin where both backends
accumulate in the same order.

Same order, so bitwise: y, dx, dw1, dw2. The vector handlers issue the twin's fp32 operations in the twin's
order (SwiGLU, its gradient, the top-k reductions, w * dy), and the stub's cube is the twin's GEMM.
Not the same order: d topk_weights. The kernel computes <ret_y row, dy> as Mul + ReduceSum (pairwise) per
chunk, the twin as one running sum. Both are fp32 sums of h products, each within gamma_h = h u / (1 - h u)
of the exact sum relative to sum |a_c b_c|, so they may differ by 2 gamma_h sum |a_c b_c| (the bound below).
"""
from __future__ import annotations

import numpy as np
import pytest

from ascend_helpers import case, run
from hpmoe.runtime.dtypes import to_float64
from hpmoe.runtime.routing import plan_rank
from hpmoe.runtime.tolerances import compare
from hpmoe.ssc_format import Slot

BITWISE = ("y", "dx", "dw1", "dw2")
CASES = [
    dict(dtype="fp32"),
    dict(dtype="bf16", ep=3, topk=3, routing="skewed"),
    dict(dtype="fp16", ep=2, topk=4, experts_per_rank=3, routing="random"),
    dict(dtype="bf16", ep=3, topk=8, experts_per_rank=3, hidden=48, inter=24, wgrad_tile=8, routing="skewed"),
    dict(dtype="fp32", ep=4, topk=2, routing="empty"),  # experts with no rows: zero weight-gradient blocks
    # Rows wider than one 2048-element vector chunk (h and I) and tiles wider than one 16 KiB copy chunk.
    dict(dtype="bf16", ep=2, topk=1, experts_per_rank=1, tokens=8, hidden=2080, inter=2064, tile_m=8,
         wgrad_tile=16, token_tile=8),
]


def _params(c):
    c = dict(c)
    routing = c.pop("routing", "random")
    return routing, c


@pytest.mark.parametrize("spec", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_matches_float64_reference(spec):
    routing, over = _params(spec)
    cfg, inputs, ref, schedules = case(routing, seed=3, **over)
    outputs, _, _ = run("ascendc-cpu", cfg, inputs, schedules)
    rows = compare(outputs, ref, cfg.dtype)
    failed = [r for r in rows if not r[3]]
    assert not failed, f"{cfg.dtype=} {routing=} {over=}: {failed}"


def _dtopk_bound(cfg, inputs, ret_y):
    """Per (rank, t, j): 2 gamma_h sum_c |ret_y[row, c] * dy[t, c]| (two fp32 summation orders)."""
    u = 2.0 ** -24
    h = cfg.hidden
    gamma = h * u / (1 - h * u)
    bound = np.zeros((cfg.ep, cfg.tokens, cfg.topk))
    for r in range(cfg.ep):
        rows = plan_rank(cfg, inputs.topk_ids[r]).token_rows.reshape(cfg.tokens, cfg.topk)
        for j in range(cfg.topk):  # only rows the combine wrote (the rest of the window is garbage)
            ret = to_float64(ret_y[r][rows[:, j]], cfg.dtype)
            bound[r, :, j] = 2 * gamma * np.abs(ret * inputs.dy[r]).sum(axis=1)
    return bound


@pytest.mark.parametrize("spec", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_bitwise_equal_to_cpu_twin_where_same_order(spec):
    routing, over = _params(spec)
    cfg, inputs, _, schedules = case(routing, seed=5, **over)
    _, twin_bits, _ = run("cpu", cfg, inputs, schedules)
    _, asc_bits, extra = run("ascendc-cpu", cfg, inputs, schedules)
    for name in BITWISE:
        a, b = twin_bits[name], asc_bits[name]
        if a.tobytes() != b.tobytes():
            i = int(np.flatnonzero(a.reshape(-1) != b.reshape(-1))[0])
            pytest.fail(f"{name}: first mismatch at flat index {i}: twin {a.reshape(-1)[i]!r}, "
                        f"ascendc-cpu {b.reshape(-1)[i]!r} ({cfg.dtype=} {routing=} {over=})")
    diff = np.abs(twin_bits["dtopk_weights"].astype(np.float64) - asc_bits["dtopk_weights"].astype(np.float64))
    bound = _dtopk_bound(cfg, inputs, extra["ret_y"])
    worst = np.unravel_index(np.argmax(diff - bound), diff.shape)
    assert np.all(diff <= bound), f"dtopk_weights {worst}: |diff| {diff[worst]:.3e} > bound {bound[worst]:.3e}"


def test_repeated_launches_are_deterministic_and_use_epochs():
    """Three fwd+bwd launches on one heap (counters never reset) give the bits of a single launch."""
    cfg, inputs, ref, schedules = case("skewed", seed=7, dtype="bf16", ep=3, topk=3)
    _, once, _ = run("ascendc-cpu", cfg, inputs, schedules, iterations=1)
    outputs, thrice, _ = run("ascendc-cpu", cfg, inputs, schedules, iterations=3)
    for name in once:
        assert once[name].tobytes() == thrice[name].tobytes(), name
    assert all(r[3] for r in compare(outputs, ref, cfg.dtype))


def test_experts_without_rows_get_zero_weight_gradients():
    cfg, inputs, ref, schedules = case("empty", seed=1, dtype="fp32", ep=4, topk=2)
    outputs, _, _ = run("ascendc-cpu", cfg, inputs, schedules)
    empty = np.argwhere(np.all(ref["dw1"] == 0, axis=(2, 3)))
    assert len(empty) > 0, "the 'empty' routing should leave some expert without rows"
    for r, e in empty:
        assert np.all(outputs["dw1"][r, e] == 0) and np.all(outputs["dw2"][r, e] == 0), (r, e)


# What each handler writes (one slot per handler and direction); all but the router-weight gradient are
# computed in the twin's order, so every one must match the twin bit for bit, pads and untouched rows included
# (the twin's slots start with the garbage the ascendc-cpu windows start with).
HANDLER_OUTPUTS = {
    Slot.PEER_READY: "ENTRY_SIGNAL", Slot.RECV_COUNTS: "COUNT_PUT", Slot.RECV_X: "DISPATCH_PUT",
    Slot.H: "GMM (x W1)", Slot.A: "SWIGLU", Slot.Y_EXPERT: "GMM (a W2)", Slot.RET_Y: "COMBINE_PUT (fwd)",
    Slot.Y: "COMBINE_REDUCE", Slot.RECV_DY: "BWD_DISPATCH_PUT", Slot.DA: "GMM_TRANS_B (dY W2^T)",
    Slot.DH: "SWIGLU_GRAD", Slot.DX_EXPERT: "GMM_TRANS_B (dH W1^T)", Slot.RET_DX: "COMBINE_PUT (bwd)",
    Slot.DX: "BWD_COMBINE_REDUCE", Slot.DW1: "GMM_WEIGHT_GRAD (dW1)", Slot.DW2: "GMM_WEIGHT_GRAD (dW2)",
}


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_every_handler_output_matches_the_twin(dtype):
    cfg, inputs, _, schedules = case("skewed", seed=11, dtype=dtype, ep=3, topk=3)
    _, _, twin = run("cpu", cfg, inputs, schedules, garbage=True)
    _, _, asc = run("ascendc-cpu", cfg, inputs, schedules)
    assert np.any(twin["slots"][Slot.DH][0] != 0), "the run should have written dH"
    for slot, handler in HANDLER_OUTPUTS.items():
        for r in range(cfg.ep):
            a, b = twin["slots"][slot][r], asc["slots"][slot][r]
            assert a.tobytes() == b.tobytes(), (f"{handler} ({slot.name}) on rank {r}: "
                                                f"{np.count_nonzero(a != b)} of {a.size} elements differ ({dtype=})")


def test_ranks_as_processes_give_the_bits_of_ranks_as_threads():
    """`hpmoe run --backend ascendc-cpu` runs each rank in its own process over POSIX shared memory."""
    from hpmoe.runtime.twin import CpuTwin

    cfg, inputs, _, schedules = case("skewed", seed=13, dtype="bf16", ep=3, topk=3)
    _, threads, _ = run("ascendc-cpu", cfg, inputs, schedules)
    with CpuTwin(cfg, schedules, shared_memory=True, timeout_s=30.0, backend="ascendc-cpu") as twin:
        twin.load_inputs(inputs)
        twin.run_processes()
        processes = twin.raw_outputs()
    for name in threads:
        assert threads[name].tobytes() == processes[name].tobytes(), name


@pytest.mark.parametrize("ep,topk", [(1, 2), (2, 3)])
def test_passes_of_the_speculative_bucket_give_one_launch_rows_bitwise(ep, topk):
    """A pass (docs/design.md, "Routing beyond the bucket"): the plan of a token range and reductions that write
    only its tokens, through the kernel's tiling. Over all passes, y and dx are bitwise one launch's, and d
    topk_weights too (the same kernel computes each token's dots either way); rows outside a pass keep what
    they held."""
    from hpmoe.runtime.twin import CpuTwin
    from hpmoe.speculative_bucket import pass_ranges
    cfg, inputs, _, schedules = case("skewed", seed=6, dtype="bf16", ep=ep, topk=topk, tokens=96)
    _, whole, _ = run("ascendc-cpu", cfg, inputs, schedules)
    ranges = pass_ranges(cfg, cfg.recv_rows_per_src // 2 // cfg.tile_m * cfg.tile_m or cfg.tile_m)
    assert len(ranges) >= 2, ranges
    with CpuTwin(cfg, schedules, timeout_s=20.0, backend="ascendc-cpu") as twin:
        for tokens in ranges:
            twin.load_inputs(inputs, tokens=tokens)
            twin.run_threads("fwd", tokens=tokens)
            twin.run_threads("bwd", tokens=tokens)
        passes = twin.raw_outputs()
    for name in ("y", "dx", "dtopk_weights"):
        assert np.array_equal(passes[name], whole[name]), f"{name}: the passes differ from one launch"
