"""hpmoe.torch on a GPU, as a PyTorch user calls it: forward output and every gradient (x, w1, w2,
topk_weights) through torch.autograd against the float64 reference; the routing plan built on the GPU equal
to the numpy plan; no host synchronisation in a steady-state step; a captured CUDA graph of forward+backward
bitwise equal to eager; two microbatches in flight; weights as transposed views (transformers' layout);
autocast, zero tokens and bad input. Under torchrun (one process per GPU): EP 2 and 4. Skips with the reason
when torch, the CUDA library or (enough) GPUs are missing.

Tolerances: hpmoe.runtime.tolerances (10 unit roundoffs of the dtype: at most 6 stored roundings feed an
output); dW1/dW2 are rounded once to the parameter dtype in the kernel, within that budget."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hpmoe.cuda.native import gpu_count, gpu_unavailable_reason
from hpmoe.reference import moe_reference
from hpmoe.runtime.tolerances import compare

torch = pytest.importorskip("torch", reason="PyTorch is not installed (optional dependency)")
needs_gpu = pytest.mark.skipif(gpu_count() == 0 or not torch.cuda.is_available(),
                               reason=gpu_unavailable_reason() or "torch sees no GPU")
NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16"}


def f64(t) -> np.ndarray:
    return t.detach().double().cpu().numpy()


def routing(T: int, E: int, k: int, seed: int):
    g = torch.Generator(device="cuda").manual_seed(seed)
    ids = torch.argsort(torch.rand(T, E, device="cuda", generator=g), dim=1)[:, :k].int()
    w = torch.softmax(torch.randn(T, k, device="cuda", generator=g), -1)
    return ids, w


def check_against_float64(x, w1, w2, ids, w, dy, got: dict, dtype) -> None:
    ref = moe_reference(f64(x)[None], f64(w1)[None], f64(w2)[None], ids.cpu().numpy()[None],
                        w.detach().float().cpu().numpy()[None], f64(dy)[None])
    got = {n: v[None] for n, v in got.items()}
    bad = [f"{n}: {e:.3e} > {tol:.1e}" for n, e, tol, ok in compare(got, ref, NAMES[dtype]) if not ok]
    assert not bad, f"{dtype=}: " + "; ".join(bad)


def step(m, x, ids, w, dy):
    y = m(x, ids, w)
    y.backward(dy)
    return y


def checked_step(m, x0, ids, w, dy, weights_layout: str = "stored") -> dict:
    """One forward + backward of module m on copies of x0 and w, every output checked against float64; returns
    the outputs (y, dx, dw1, dw2, dtopk_weights). "linear": the weights passed as views of nn.Linear's [E, 2I, h]
    / [E, h, I] tensors (read in place), their gradients read back in the stored layout."""
    x = x0.clone().requires_grad_()
    wt = w.detach().clone().requires_grad_()
    if weights_layout == "linear":
        from hpmoe.torch import moe_ffn
        gu = m.w1.detach().transpose(1, 2).contiguous().requires_grad_()
        dn = m.w2.detach().transpose(1, 2).contiguous().requires_grad_()
        y = moe_ffn(x, ids, wt, gu.transpose(1, 2), dn.transpose(1, 2), m.runtime)
        y.backward(dy)
        dw1, dw2 = gu.grad.transpose(1, 2), dn.grad.transpose(1, 2)
    else:
        y = step(m, x, ids, wt, dy)
        dw1, dw2 = m.w1.grad, m.w2.grad
    got = {"y": y, "dx": x.grad, "dw1": dw1, "dw2": dw2, "dtopk_weights": wt.grad}
    check_against_float64(x, m.w1, m.w2, ids, wt, dy, {n: f64(v) for n, v in got.items()}, torch.bfloat16)
    return {n: v.detach().clone() for n, v in got.items()}


def assert_variants_bitwise_equal(T: int, h: int, inter: int, experts: int, k: int, variants: list[dict],
                                  check_module=None) -> None:
    """One step of MoEFFN(**variant) per variant on the same inputs and weights: each against float64, all
    bitwise equal to the first. `check_module(module, variant)` may assert on a module's schedule."""
    from hpmoe.torch import MoEFFN
    ids, w = routing(T, experts, k, 5)
    x0 = torch.randn(T, h, device="cuda").bfloat16()
    dy = torch.randn(T, h, device="cuda").bfloat16()
    results = []
    for variant in variants:
        m = MoEFFN(h, inter, experts, k, num_aic=8, num_aiv=4, **variant)
        if check_module is not None:
            check_module(m, variant)
        torch.manual_seed(0)
        with torch.no_grad():
            m.w1.copy_(torch.randn_like(m.w1, dtype=torch.float32).mul_(h ** -0.5))
            m.w2.copy_(torch.randn_like(m.w2, dtype=torch.float32).mul_(inter ** -0.5))
        results.append(checked_step(m, x0, ids, w, dy))
    for variant, result in zip(variants[1:], results[1:]):
        for name in results[0]:
            assert torch.equal(results[0][name], result[name]), f"{name}: {variant} differs from {variants[0]}"


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_moeffn_forward_and_gradients_match_float64(dtype):
    from hpmoe.torch import MoEFFN
    torch.manual_seed(0)
    T, h, inter, E, k = 192, 128, 64, 4, 2
    m = MoEFFN(h, inter, E, k, dtype=dtype, num_aic=4, num_aiv=4)
    x = torch.randn(T, h, device="cuda").to(dtype).requires_grad_()
    ids, w = routing(T, E, k, 1)
    w.requires_grad_()
    dy = torch.randn(T, h, device="cuda").to(dtype)
    y = step(m, x, ids, w, dy)
    check_against_float64(x, m.w1, m.w2, ids, w, dy, {"y": f64(y), "dx": f64(x.grad), "dw1": f64(m.w1.grad),
                                                       "dw2": f64(m.w2.grad), "dtopk_weights": f64(w.grad)}, dtype)


@needs_gpu
@pytest.mark.parametrize("ep,E,k,aligned", [(1, 4, 3, False), (3, 2, 4, False), (2, 8, 8, False),
                                            (1, 4, 3, True), (2, 8, 8, True), (1, 40, 6, True)])
def test_device_plan_equals_numpy_plan(ep, E, k, aligned):
    """The plan kernels (op_kernel/cuda/routing_plan.cuh) against routing.plan_rank, bit for bit; T spans
    several plan chunks (2048 ids each) and is a multiple of no tile; expert-aligned slots too."""
    from hpmoe.config import make_config
    from hpmoe.cuda.group import CudaGroup
    from hpmoe.runtime.routing import bucket_for, make_routing, plan_rank
    from hpmoe.runtime.twin import make_inputs
    from hpmoe.ssc_format import Slot
    cfg = make_config(None, {"ep": ep, "tokens": 1111, "hidden": 64, "inter": 32, "experts_per_rank": E,
                             "topk": k, "tile_m": 128, "wgrad_tile": 8, "num_aic": 2, "num_aiv": 2, "dtype": "bf16",
                             "expert_aligned": aligned})
    ids, weights = make_routing(cfg, "skewed", 4)
    cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, ids))
    with CudaGroup(cfg, [0] * ep) as g:
        g.load_inputs(make_inputs(cfg, ids, weights, 4))
        g.run("fwd", timeout_s=10)
        for r in range(ep):
            ref = plan_rank(cfg, ids[r])
            np.testing.assert_array_equal(g.read(r, Slot.SEND_ROWS), ref.send_rows)
            np.testing.assert_array_equal(g.read(r, Slot.SEND_COUNTS), ref.send_counts)
            np.testing.assert_array_equal(g.read(r, Slot.TOKEN_ROWS), ref.token_rows)


@needs_gpu
def test_overflowing_routing_is_refused_before_rows_move():
    from hpmoe.config import make_config
    from hpmoe.cuda.group import CudaGroup
    from hpmoe.cuda.native import CudaFailure
    from hpmoe.runtime.routing import make_routing, rows_needed
    from hpmoe.runtime.twin import make_inputs
    cfg = make_config(None, {"ep": 2, "tokens": 256, "hidden": 64, "inter": 32, "experts_per_rank": 2, "topk": 2,
                             "tile_m": 128, "wgrad_tile": 8, "num_aic": 2, "num_aiv": 2, "dtype": "bf16",
                             "recv_rows_per_src": 128})
    ids, weights = make_routing(cfg, "skewed", 2)
    need = int(rows_needed(cfg, ids).max())
    assert need > 128  # premise: this routing needs more than the bucket
    with CudaGroup(cfg, [0, 0]) as g:
        inputs = make_inputs(cfg, ids, weights, 2)
        from hpmoe.runtime.dtypes import to_storage
        for r in range(2):  # raw writes: load_inputs would refuse this routing on the host first
            g.load_rank(r, to_storage(inputs.x[r], "bf16"), to_storage(inputs.w1[r], "bf16"),
                        to_storage(inputs.w2[r], "bf16"), to_storage(inputs.dy[r], "bf16"), ids[r], weights[r])
        with pytest.raises(CudaFailure, match=r"sends \d+ rows to one rank; the bucket holds C=128"):
            g.run("fwd", timeout_s=5)


@needs_gpu
def test_steady_state_step_does_not_synchronise():
    """After warm-up, forward+backward return while the GPU is still busy with work queued before them (a
    host sync would have waited for it); PyTorch's sync debug mode sees no synchronising call either."""
    from hpmoe.torch import MoEFFN
    T, h, inter, E, k = 512, 256, 128, 4, 2
    m = MoEFFN(h, inter, E, k, num_aic=8, num_aiv=4)
    x = torch.randn(T, h, device="cuda").bfloat16().requires_grad_()
    ids, w = routing(T, E, k, 2)
    dy = torch.randn(T, h, device="cuda").bfloat16()
    for _ in range(2):
        step(m, x, ids, w, dy)
    assert_step_does_not_wait_for_the_gpu(lambda: step(m, x, ids, w, dy))
    m.runtime.check()


def assert_step_does_not_wait_for_the_gpu(run) -> None:
    """`run()` (a warmed-up step) returns while the GPU still runs about a second of work queued before it,
    and PyTorch's sync debug mode sees no synchronising call in it."""
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9))  # about a second of GPU time queued ahead of the step
    torch.cuda.set_sync_debug_mode("error")
    try:
        run()
        busy = not torch.cuda.current_stream().query()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert busy, "the step waited for the GPU: a host synchronisation happened"
    torch.cuda.synchronize()


@needs_gpu
def test_cuda_graph_of_forward_and_backward_replays_bitwise_equal_to_eager():
    from hpmoe.torch import MoEFFN
    T, h, inter, E, k = 384, 128, 64, 4, 2
    m = MoEFFN(h, inter, E, k, num_aic=8, num_aiv=4)
    ids, w = routing(T, E, k, 3)
    assert_graph_replay_matches_eager(m, torch.randn(T, h, device="cuda").bfloat16(), ids, w,
                                      torch.randn(T, h, device="cuda").bfloat16())


def assert_graph_replay_matches_eager(m, x0, ids, w0, dy) -> None:
    """A forward+backward of `m` captured in a CUDA graph (after two eager steps on a side stream, as
    capture needs) replays three times with y and every gradient bitwise the eager step's."""
    x, w = x0.clone().requires_grad_(), w0.detach().clone().requires_grad_()

    def run():
        for t in (x, w, m.w1, m.w2):
            t.grad = None
        y = step(m, x, ids, w, dy)
        return [y.detach().clone()] + [t.grad.clone() for t in (x, w, m.w1, m.w2)]

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        eager = run()
        run()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    for t in (x, w, m.w1, m.w2):
        t.grad = None
    with torch.cuda.graph(graph):
        y = m(x, ids, w)
        y.backward(dy)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    m.runtime.check()
    replayed = [y.detach()] + [t.grad for t in (x, w, m.w1, m.w2)]
    for name, a, b in zip(("y", "dx", "dw", "dw1", "dw2"), eager, replayed):
        assert torch.equal(a, b), f"{name} differs between eager and graph replay"


@needs_gpu
def test_two_microbatches_in_flight_match_float64():
    """fwd(mb1), fwd(mb2), bwd(mb1), bwd(mb2), as pipeline schedules run them: each forward holds its own
    heap generation; the weight gradients accumulate over both."""
    from hpmoe.torch import MoEFFN
    torch.manual_seed(5)
    T, h, inter, E, k = 256, 128, 64, 4, 2
    m = MoEFFN(h, inter, E, k, num_aic=8, num_aiv=4)
    mbs = []
    for seed in (6, 7):
        x = torch.randn(T, h, device="cuda").bfloat16().requires_grad_()
        ids, w = routing(T, E, k, seed)
        mbs.append((x, ids, w.requires_grad_(), torch.randn(T, h, device="cuda").bfloat16()))
    ys = [m(x, ids, w) for x, ids, w, _ in mbs]
    ys[0].backward(mbs[0][3])
    g1 = (f64(m.w1.grad), f64(m.w2.grad))
    ys[1].backward(mbs[1][3])
    assert len(m.runtime._all[next(iter(m.runtime._all))]) == 2  # two generations were in use at once
    for i, (x, ids, w, dy) in enumerate(mbs):
        ref = moe_reference(f64(x)[None], f64(m.w1)[None], f64(m.w2)[None], ids.cpu().numpy()[None],
                            w.detach().cpu().numpy()[None], f64(dy)[None])
        got = {"y": f64(ys[i])[None], "dx": f64(x.grad)[None], "dtopk_weights": f64(w.grad)[None]}
        if i == 0:  # the weight gradients after the first backward alone
            got.update({"dw1": g1[0][None], "dw2": g1[1][None]})
        bad = [f"mb{i} {n}: {e:.3e} > {tol:.1e}" for n, e, tol, ok in compare(got, {n: ref[n] for n in got}, "bf16")
               if not ok]
        assert not bad, "; ".join(bad)
    # Accumulated: dW(mb1) + dW(mb2), summed by autograd in bf16 (one more rounding: 2x the tolerance).
    ref_sum = [moe_reference(f64(x)[None], f64(m.w1)[None], f64(m.w2)[None], ids.cpu().numpy()[None],
                             w.detach().cpu().numpy()[None], f64(dy)[None]) for x, ids, w, dy in mbs]
    for name, grad in (("dw1", m.w1.grad), ("dw2", m.w2.grad)):
        want = ref_sum[0][name] + ref_sum[1][name]
        err = np.abs(f64(grad)[None] - want).max() / np.abs(want).max()
        assert err < 2 * 10 * 2.0 ** -8, f"accumulated {name}: {err:.3e}"


@needs_gpu
@pytest.mark.parametrize("weights_layout", ["stored", "linear"])
def test_segment_pieces_around_one_warpgroup_match_float64_and_each_other(weights_layout):
    """An expert segment's last row tile with at most 64 rows is multiplied by one warpgroup (BlockGemmTma's
    m_live): per-expert row counts put pieces of 1, 63, 64, 65, 127 and 128 rows (empty experts too) in
    aligned and in straddled tiles, for the GMM and the GMM_TRANS_B tiles (both weight layouts). Every output
    against float64, and aligned bitwise equal to unaligned (a row's sums do not depend on its tile)."""
    from hpmoe.torch import MoEFFN
    counts = [1, 64, 65, 192, 193, 0, 127, 130, 63, 128]
    E, h, inter = len(counts), 256, 384
    g = torch.Generator(device="cuda").manual_seed(11)
    ids = torch.cat([torch.full((c,), e, dtype=torch.int32) for e, c in enumerate(counts)]).cuda()
    ids = ids[torch.randperm(ids.numel(), device="cuda", generator=g)][:, None].contiguous()
    T = ids.shape[0]
    w = torch.rand(T, 1, device="cuda", generator=g) + 0.5
    x0 = torch.randn(T, h, device="cuda", generator=g).bfloat16()
    dy = torch.randn(T, h, device="cuda", generator=g).bfloat16()
    w1 = (torch.randn(E, h, 2 * inter, device="cuda", generator=g) * h ** -0.5).bfloat16()
    w2 = (torch.randn(E, inter, h, device="cuda", generator=g) * inter ** -0.5).bfloat16()
    results = []
    for aligned in (False, True):
        m = MoEFFN(h, inter, E, 1, num_aic=8, num_aiv=4, expert_aligned=aligned)
        with torch.no_grad():
            m.w1.copy_(w1)
            m.w2.copy_(w2)
        results.append(checked_step(m, x0, ids, w, dy, weights_layout))
    for name in results[0]:
        assert torch.equal(results[0][name], results[1][name]), f"{name}: aligned differs from unaligned"


@needs_gpu
def test_transposed_weight_views_match_contiguous_bitwise():
    """transformers stores gate_up_proj [E, 2I, h] and down_proj [E, h, I]: passing their transposes reads
    them in place (a transposed-layout schedule) with the same bits of y as contiguous weights, and the
    gradients reach the stored parameters in their layout."""
    from hpmoe.torch import MoeFfnRuntime, moe_ffn
    T, h, inter, E, k = 256, 128, 64, 4, 2
    rt = MoeFfnRuntime(h, inter, E, k, num_aic=8, num_aiv=4)
    gate_up = (torch.randn(E, 2 * inter, h, device="cuda") * h ** -0.5).bfloat16().requires_grad_()
    down = (torch.randn(E, h, inter, device="cuda") * inter ** -0.5).bfloat16().requires_grad_()
    w1 = gate_up.detach().transpose(1, 2).contiguous().requires_grad_()
    w2 = down.detach().transpose(1, 2).contiguous().requires_grad_()
    x = torch.randn(T, h, device="cuda").bfloat16()
    ids, w = routing(T, E, k, 8)
    dy = torch.randn(T, h, device="cuda").bfloat16()
    y1 = moe_ffn(x, ids, w, gate_up.transpose(1, 2), down.transpose(1, 2), rt)
    y1.backward(dy)
    y2 = moe_ffn(x, ids, w, w1, w2, rt)
    y2.backward(dy)
    assert torch.equal(y1, y2)
    assert rt.config(T, None, True).weights_transposed and len(rt._all) == 2  # read in place: its own schedule
    # Weight gradients: the transposed layout computes dW^T = dY^T X (operands swapped), same K order; equal
    # within one rounding of the parameter dtype (bf16: 2^-8 relative), reported when not bitwise.
    for name, a, b in (("gate_up_proj", gate_up.grad, w1.grad.transpose(1, 2)),
                       ("down_proj", down.grad, w2.grad.transpose(1, 2))):
        assert a.is_contiguous(), f"{name}.grad is not in the parameter's layout"
        err = ((a.float() - b.float()).abs().max() / b.float().abs().max()).item()
        print(f"{name}: bitwise {torch.equal(a, b)}, max rel diff {err:.2e}")
        assert err <= 2.0 ** -8, f"{name}.grad differs by {err:.2e}"


@needs_gpu
def test_repeats_are_bitwise_identical_and_autocast_and_zero_tokens_work():
    from hpmoe.torch import MoEFFN
    T, h, inter, E, k = 256, 128, 64, 4, 2
    m = MoEFFN(h, inter, E, k, num_aic=8, num_aiv=4)
    x = torch.randn(T, h, device="cuda").bfloat16()
    ids, w = routing(T, E, k, 9)
    a = m(x, ids, w)
    b = m(x, ids, w)
    assert torch.equal(a, b)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        c = m(x.float(), ids, w)
    assert c.dtype == torch.bfloat16 and torch.equal(a, c)
    x0 = torch.randn(0, h, device="cuda").bfloat16().requires_grad_()
    y0 = m(x0, ids[:0], w[:0])
    assert y0.shape == (0, h)
    y0.sum().backward()
    assert x0.grad.shape == (0, h) and m.w1.grad is not None and not m.w1.grad.any()


@needs_gpu
def test_bad_input_gets_one_line_errors():
    from hpmoe.cuda.native import CudaFailure
    from hpmoe.torch import MoEFFN
    T, h, inter, E, k = 128, 64, 32, 2, 1
    m = MoEFFN(h, inter, E, k, num_aic=2, num_aiv=2)
    x = torch.randn(T, h, device="cuda").bfloat16()
    ids = torch.zeros(T, k, dtype=torch.int32, device="cuda")
    w = torch.ones(T, k, device="cuda")
    with pytest.raises(ValueError, match=r"x is on cpu, the op runs on cuda"):
        m(x.cpu(), ids, w)
    with pytest.raises(ValueError, match=r"topk_ids must have shape \[128, 1\]"):
        m(x, ids[:5], w)
    with pytest.raises(ValueError, match=r"x is torch.float32, the op was built for torch.bfloat16"):
        m(x.float(), ids, w)
    bad = ids.clone()
    bad[7, 0] = 9
    y = m(x, bad, w)
    with pytest.raises(CudaFailure, match=r"topk_ids\[7, 0\] = 9 is outside \[0, 2\); the output was set to NaN"):
        m.runtime.check()
    assert torch.isnan(y).all()
    m(x, ids, w)  # a fresh heap generation after the failure
    m.runtime.check()


def _torchrun_check(ep: int, env: dict | None = None) -> None:
    import os
    script = Path(__file__).with_name("moeffn_torchrun_check.py")
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ep), str(script)],
                         capture_output=True, text=True, timeout=240, env={**os.environ, **(env or {})})
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert f"ep={ep} second step bitwise identical: True" in res.stdout
    assert f"ep={ep} bucket grew for the hot routing: True" in res.stdout
    assert f"ep={ep} step 3 y, dx, dtopk bitwise step 5's: True" in res.stdout


@pytest.mark.parametrize("speculative", ["1", "0"])
@pytest.mark.parametrize("ep", [2, 4])
def test_moeffn_over_torchrun_ep_group(ep, speculative):
    if gpu_count() < ep:
        pytest.skip(f"needs {ep} GPUs (one process per GPU), found {gpu_count()}")
    _torchrun_check(ep, {"HPMOE_SPECULATIVE": speculative})


@pytest.mark.parametrize("speculative", ["1", "0"])
@pytest.mark.parametrize("ep", [2, 4])
def test_moeffn_over_torchrun_ranks_sharing_one_gpu(ep, speculative):
    """The EP > 1 path of the op (IPC-mapped heaps; the speculative bucket, a routing that outgrows it run as
    passes and the bucket grown later; or the bucket agreed before each forward) on one GPU: ranks as
    processes on GPU 0, their kernels concurrent through CUDA MPS (HPMOE_TEST_MPS=1 says the MPS daemon runs;
    nothing here starts it)."""
    import os
    if gpu_count() == 0 or os.environ.get("HPMOE_TEST_MPS") != "1":
        pytest.skip("needs a GPU with the CUDA MPS daemon running (set HPMOE_TEST_MPS=1): two processes' "
                    "persistent kernels are not co-resident without it")
    _torchrun_check(ep, {"HPMOE_SHARED_GPU": "1", "HPMOE_SPECULATIVE": speculative})


@needs_gpu
def test_torch_compile_fullgraph_and_checkpointing_match_eager_bitwise():
    """The custom ops trace with no graph break (fullgraph=True refuses any); activation checkpointing
    recomputes the forward in backward. Both give eager's bits."""
    from hpmoe.torch import MoEFFN
    T, h, inter, E, k = 256, 128, 64, 4, 2
    m = MoEFFN(h, inter, E, k, num_aic=8, num_aiv=4)
    ids, w = routing(T, E, k, 10)
    assert_compiled_and_checkpointed_match_eager(m, torch.randn(T, h, device="cuda").bfloat16(), ids, w,
                                                 torch.randn(T, h, device="cuda").bfloat16())


def assert_compiled_and_checkpointed_match_eager(m, x0, ids, w, dy) -> None:
    """y, dx, dW1 and dW2 of one step of `m` traced by torch.compile(fullgraph=True) and under activation
    checkpointing, each bitwise the eager step's."""
    from torch.utils.checkpoint import checkpoint

    def grads(fn):
        x = x0.clone().requires_grad_()
        m.w1.grad = m.w2.grad = None
        y = fn(x)
        y.backward(dy)
        return [y.detach(), x.grad, m.w1.grad, m.w2.grad]

    eager = grads(lambda x: m(x, ids, w))
    compiled = torch.compile(lambda x: m(x, ids, w), fullgraph=True)
    for name, a, b in zip(("y", "dx", "dw1", "dw2"), eager, grads(compiled)):
        assert torch.equal(a, b), f"torch.compile: {name} differs from eager"
    for name, a, b in zip(("y", "dx", "dw1", "dw2"), eager,
                          grads(lambda x: checkpoint(lambda t: m(t, ids, w), x, use_reentrant=False))):
        assert torch.equal(a, b), f"checkpoint: {name} differs from eager"
    m.runtime.check()

@needs_gpu
def test_heaps_leave_out_what_calls_bind():
    """The op's heaps hold no bytes for the tensors a call binds (x, the weights, y, the gradients, ...); a
    launch that does not bind them, or a write into them, is refused in one line."""
    from hpmoe.cuda.group import CudaGroup
    from hpmoe.cuda.native import CudaFailure
    from hpmoe.ssc_format import Slot
    from hpmoe.torch import MoEFFN
    from hpmoe.torch.runtime import EXTERNAL_SLOTS
    T, h, inter, E, k = 256, 128, 64, 4, 2
    m = MoEFFN(h, inter, E, k, num_aic=8, num_aiv=4)
    x = torch.randn(T, h, device="cuda").bfloat16()
    ids, w = routing(T, E, k, 12)
    m(x, ids, w)
    cfg = m.runtime.config(T)
    with CudaGroup(cfg, [0]) as whole:
        from hpmoe.runtime.native import NP_DTYPES
        bound_bytes = sum(int(np.prod(whole.specs[s].shape)) * np.dtype(NP_DTYPES[whole.specs[s].dtype]).itemsize
                          for s in EXTERNAL_SLOTS)
        saved = whole.segment_bytes() - m.runtime.heap_bytes()
        assert bound_bytes - 64 * len(EXTERNAL_SLOTS) <= saved, f"{saved=} {bound_bytes=}"
    with CudaGroup(cfg, [0], external=EXTERNAL_SLOTS) as g:
        with pytest.raises(CudaFailure, match="slot x lives outside this group's heap"):
            g.write(0, Slot.X, np.zeros((T, h), np.uint16))
        with pytest.raises(CudaFailure, match="slot x lives outside the heap: a fwd launch must bind it"):
            g.launch(0, "fwd", torch.cuda.current_stream().cuda_stream, {})


@needs_gpu
@pytest.mark.parametrize("fused", [False, True])
def test_generations_share_one_workspace_bitwise(fused):
    """Two forwards in flight hold two heap generations that share one workspace (workspace.py): outputs and
    gradients bit for bit those of generations that each own one, the generations smaller by the shared slots;
    a slot that a forward saves cannot be placed outside its heap (one line)."""
    from hpmoe.cuda.group import CudaGroup
    from hpmoe.cuda.native import CudaFailure
    from hpmoe.ssc_format import Slot
    from hpmoe.torch import moe_ffn
    from hpmoe.torch.runtime import MoeFfnRuntime
    from hpmoe.workspace import plan_workspace
    from hpmoe.graphs import tensor_specs
    torch.manual_seed(21)
    T, h, inter, E, k = 256, 128, 128, 4, 2
    w1 = (torch.randn(E, h, 2 * inter, device="cuda") * h ** -0.5).bfloat16()
    w2 = (torch.randn(E, inter, h, device="cuda") * inter ** -0.5).bfloat16()
    mbs = []
    for seed in (22, 23):
        ids, w = routing(T, E, k, seed)
        mbs.append((torch.randn(T, h, device="cuda").bfloat16(), ids, w, torch.randn(T, h, device="cuda").bfloat16()))

    def run(rt):
        p1, p2 = w1.clone().requires_grad_(), w2.clone().requires_grad_()
        xs = [x.clone().requires_grad_() for x, *_ in mbs]
        ws = [w.clone().requires_grad_() for _, _, w, _ in mbs]
        ys = [moe_ffn(x, ids, tw, p1, p2, rt) for x, (_, ids, _, _), tw in zip(xs, mbs, ws)]
        for y, (*_, dy) in zip(ys, mbs):
            y.backward(dy)
        rt.check()
        return ys + [x.grad for x in xs] + [tw.grad for tw in ws] + [p1.grad, p2.grad]

    shared = MoeFfnRuntime(h, inter, E, k, num_aic=8, num_aiv=4, fuse_swiglu=fused)
    own = MoeFfnRuntime(h, inter, E, k, num_aic=8, num_aiv=4, fuse_swiglu=fused, share_workspace=False)
    for a, b in zip(run(shared), run(own)):
        assert torch.equal(a, b), "a shared workspace changed the bits"
    (key, gens), = shared._all.items()
    assert len(gens) == 2 and gens[0].placed == gens[1].placed and gens[0].placed  # both on one workspace
    cfg = shared.config(*key)  # the config its generations were made with
    plan = plan_workspace(cfg)
    assert shared.workspace_bytes() == plan.nbytes and own.workspace_bytes() == 0
    specs = tensor_specs(cfg)
    placed_bytes = sum(specs[s].nbytes for s in plan.offsets)
    saved = own.generation_bytes() - shared.generation_bytes()
    assert 2 * (placed_bytes - 64 * len(plan.offsets)) <= saved <= 2 * placed_bytes, f"{saved=} {placed_bytes=}"
    buf = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    with pytest.raises(CudaFailure, match="slot h cannot be placed outside the heap"):
        CudaGroup(cfg, [0], placed={Slot.H: buf.data_ptr()})
    with pytest.raises(CudaFailure, match="not 16-byte aligned"):
        CudaGroup(cfg, [0], placed={Slot.DA: buf.data_ptr() + 8})
