"""The speculative bucket (docs/cuda.md, "Routing beyond the bucket") on one GPU: MoEFFN(speculative=True) at
EP 1 with a bucket smaller than the routing needs runs the same launches an EP > 1 rank runs (the need agreed
inside the launch, the stand-down before any row moves, the passes, the backward's recomputed passes, the
host growing the bucket `overflow_lag` forwards later). Checked against float64 and bitwise against the
bucket that holds the routing: y, dx and d topk_weights of a pass are the rows one launch computes (each
output row's sums are the same), dW1/dW2 sum the passes' partial gradients (another order: float64 only).
EP 2 under MPS: tests/cuda/moeffn_torchrun_check.py.

Tolerances: hpmoe.runtime.tolerances (10 unit roundoffs of the dtype); the passes' weight gradients add one
rounding per pass to the parameter dtype, within that budget at the pass counts here (2-3)."""
from __future__ import annotations

import math

import pytest

from hpmoe.cuda.native import gpu_count, gpu_unavailable_reason

torch = pytest.importorskip("torch", reason="PyTorch is not installed (optional dependency)")
needs_gpu = pytest.mark.skipif(gpu_count() == 0 or not torch.cuda.is_available(),
                               reason=gpu_unavailable_reason() or "torch sees no GPU")

from test_torch_moeffn import (assert_compiled_and_checkpointed_match_eager,  # noqa: E402
                               assert_graph_replay_matches_eager, assert_step_does_not_wait_for_the_gpu,
                               check_against_float64, f64, routing)

T, H, INTER, E, K = 512, 256, 128, 4, 2


def make(capacity_factor=None, speculative=True, seed=0, expert_aligned=None):
    from hpmoe.torch import MoEFFN
    m = MoEFFN(H, INTER, E, K, num_aic=8, num_aiv=4, capacity_factor=capacity_factor, speculative=speculative,
               expert_aligned=expert_aligned)
    torch.manual_seed(seed)
    with torch.no_grad():
        m.w1.copy_(torch.randn_like(m.w1, dtype=torch.float32).mul_(H ** -0.5))
        m.w2.copy_(torch.randn_like(m.w2, dtype=torch.float32).mul_(INTER ** -0.5))
    return m


def step(m, x0, ids, w0, dy) -> dict:
    x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
    m.w1.grad = m.w2.grad = None
    y = m(x, ids, w)
    y.backward(dy)
    return {"y": y.detach(), "dx": x.grad, "dw1": m.w1.grad.clone(), "dw2": m.w2.grad.clone(), "dtopk_weights": w.grad}


def inputs(seed=3):
    ids, w = routing(T, E, K, seed)
    torch.manual_seed(seed)
    return torch.randn(T, H, device="cuda").bfloat16(), ids, w, torch.randn(T, H, device="cuda").bfloat16()


@needs_gpu
@pytest.mark.parametrize("aligned", [False, True])
def test_overflowed_forward_runs_as_passes_then_the_bucket_grows(monkeypatch, aligned):
    """expert_aligned: each pass's plan pads its experts' rows to whole row tiles, within its range."""
    monkeypatch.setenv("HPMOE_OVERFLOW_LAG", "2")
    x, ids, w, dy = inputs()
    m = make(capacity_factor=0.3, expert_aligned=aligned)  # C about 0.3 T k rows: every EP 1 forward needs T k
    rt = m.runtime
    key = (T, rt._bucket(T, ids, False), False)
    passes = rt.passes(key)
    assert len(passes) >= 2 and passes[0][0] == 0 and passes[-1][1] == T, passes
    exact = make(speculative=False, expert_aligned=aligned)  # EP 1's own bucket (C = T k): one launch a direction
    want = step(exact, x, ids, w, dy)
    got = [step(m, x, ids, w, dy) for _ in range(4)]
    torch.cuda.synchronize()
    rt.check()
    # Forwards 1 and 2 overflowed and ran as passes; forward 3 read forward 1's need and grew the bucket, so
    # forwards 3 and 4 ran in one launch each, in a second bucket.
    assert rt.overflows_seen == 2 and len(rt._all) == 2, (rt.overflows_seen, list(rt._all))
    for i, g in enumerate(got):
        check_against_float64(x, m.w1, m.w2, ids, w, dy, {n: f64(v) for n, v in g.items()}, torch.bfloat16)
        for name in ("y", "dx", "dtopk_weights"):
            assert torch.equal(g[name], want[name]), f"step {i + 1}: {name} differs from one launch's"
    for name in ("dw1", "dw2"):  # one launch's sums, as the grown bucket runs them; the passes' differ in order
        assert torch.equal(got[3][name], want[name]), name
        assert torch.equal(got[0][name], got[1][name]), f"{name}: the passes are not bitwise repeatable"


@needs_gpu
def test_forward_that_fits_runs_once_and_its_passes_do_nothing():
    """capacity_factor 1: every EP 1 routing fits; the passes enqueued behind each launch return at once
    (outputs bitwise one launch's, weight gradients included), and no call waits for the GPU."""
    x, ids, w, dy = inputs(4)
    m, exact = make(capacity_factor=1.0), make(speculative=False)
    want = step(exact, x, ids, w, dy)
    for _ in range(3):
        got = step(m, x, ids, w, dy)
    for name in want:
        assert torch.equal(got[name], want[name]), name
    # step() sets the weights' grads to None first, as every warm-up step did (a first `grad +=` in the process
    # would load its kernel: a sync).
    assert_step_does_not_wait_for_the_gpu(lambda: step(m, x, ids, w, dy))
    m.runtime.check()
    assert m.runtime.overflows_seen == 0 and m.runtime.overflow_waits == 0 and len(m.runtime._all) == 1


@needs_gpu
def test_overflow_under_a_captured_cuda_graph_replays_bitwise():
    """The passes are launches the device switches on, so a captured forward+backward whose routing overflows
    replays right: bitwise equal to eager (the host reads no need while capturing)."""
    x, ids, w, dy = inputs(5)
    m = make(capacity_factor=0.3)
    assert_graph_replay_matches_eager(m, x, ids, w, dy)
    assert len(m.runtime._all) == 1  # every forward overflowed the one bucket (the lag is 16 forwards)


@needs_gpu
def test_overflow_under_torch_compile_and_checkpointing_matches_eager_bitwise():
    """The custom ops' backward (hpmoe::moe_ffn_bwd) takes the forward's x and topk_ids for the passes; traced
    with fullgraph=True and under activation checkpointing, an overflowing step gives eager's bits."""
    x0, ids, w, dy = inputs(6)
    m = make(capacity_factor=0.3)
    assert_compiled_and_checkpointed_match_eager(m, x0, ids, w, dy)
    assert len(m.runtime._all) == 1  # every forward overflowed the one bucket (the lag is 16 forwards)


@needs_gpu
def test_heap_generations_and_layers_of_one_shape_share_one_compile(monkeypatch):
    """Three forwards in flight hold three heap generations of one bucket, and a second layer of the same shape
    makes its own; the bucket's SSCs are compiled once in the process (a training run's early steps make
    generations and grow buckets in every layer, and the compile was most of their cost). Every forward's result
    is bitwise the one-generation step's."""
    import hpmoe.torch.runtime as runtime_module
    x, ids, w, dy = inputs(7)
    want = step(make(speculative=False), x, ids, w, dy)
    compiled = []
    real = runtime_module.compile_schedules
    monkeypatch.setattr(runtime_module, "compile_schedules", lambda cfg, *a: compiled.append(cfg) or real(cfg, *a))
    runtime_module._compiled.cache_clear()  # earlier tests compiled shapes of their own
    layers = [make(capacity_factor=1.0), make(capacity_factor=1.0)]
    xs = [x.clone().requires_grad_() for _ in range(4)]
    ys = [layers[0](xi, ids, w) for xi in xs[:3]] + [layers[1](xs[3], ids, w)]
    for y in ys:
        y.backward(dy)
    stats = [m.runtime.bucket_stats() for m in layers]
    for m in layers:
        m.runtime.check()
    assert [[b["generations"] for b in st["buckets"]] for st in stats] == [[3], [1]], stats
    assert len(compiled) == 1 and all(st["group_seconds"] > 0 for st in stats), (len(compiled), stats)
    # The parts of a generation's host time add up to it (EP 1: a compile, then the heap).
    for st in stats:
        assert math.isclose(sum(st["group_parts"].values()), st["group_seconds"], rel_tol=1e-9), st
        assert st["group_parts"]["heap"] > 0 and st["group_parts"]["barrier"] == 0, st
    for y, xi in zip(ys, xs):
        assert torch.equal(y.detach(), want["y"]) and torch.equal(xi.grad, want["dx"])


@needs_gpu
def test_kernel_time_of_an_overflowed_call_spans_its_passes(monkeypatch):
    """time_kernels on an overflowed call times its launches as one (the stood-down launch to the last pass), so
    it is longer than one launch of a bucket that fits; timing only the first launch gave a fraction of it."""
    monkeypatch.setenv("HPMOE_OVERFLOW_LAG", "8")  # no growth within these calls
    x, ids, w, dy = inputs(8)
    spans = {}
    for name, m in (("overflowed", make(capacity_factor=0.3)), ("fits", make(capacity_factor=1.0))):
        for _ in range(3):  # the last call's times
            m.runtime.time_kernels = True
            step(m, x, ids, w, dy)
        spans[name] = m.runtime.kernel_ms()
        m.runtime.check()
        (key,) = m.runtime._all  # one bucket: the lag outlasts these calls
        if name == "overflowed":  # C about 0.3 T k rows: every EP 1 forward needs T k, so each ran as passes
            assert len(m.runtime.passes(key)) >= 2 and key[1] < T * K, key
    for d in ("fwd", "bwd"):
        assert spans["overflowed"][d] > spans["fits"][d] > 0, spans
