"""Fused weight-gradient accumulation (hpmoe.torch.wgrad, kDwAccumulate): the backward kernel adds dW1/dW2 to
.grad or Megatron-style main_grad itself, as old + dW rounded to the model dtype: bitwise what autograd's add
(or Megatron's main_grad.add_) leaves. Checked bitwise against the unfused path over two micro-steps and against
the float64 reference, in transformers' layout, under CUDA graph replay, and with bad buffers. Skips with the
reason when torch, the CUDA library or a GPU is missing.

Tolerances: hpmoe.runtime.tolerances (10 unit roundoffs of the dtype) per micro-step's dW; a sum of two
micro-steps in the model dtype adds one rounding of the sum (2x the budget); fp32 main_grad adds none."""
from __future__ import annotations

import numpy as np
import pytest

from hpmoe.cuda.native import gpu_count, gpu_unavailable_reason
from hpmoe.reference import moe_reference

torch = pytest.importorskip("torch", reason="PyTorch is not installed (optional dependency)")
needs_gpu = pytest.mark.skipif(gpu_count() == 0 or not torch.cuda.is_available(),
                               reason=gpu_unavailable_reason() or "torch sees no GPU")
BF16_BUDGET = 10 * 2.0 ** -8  # hpmoe.runtime.tolerances' bf16 entry: 10 unit roundoffs
T, H, INTER, E, K = 256, 128, 64, 4, 2


def f64(t) -> np.ndarray:
    return t.detach().double().cpu().numpy()


def microbatch(seed: int):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(T, H, device="cuda", generator=g).bfloat16()
    ids = torch.argsort(torch.rand(T, E, device="cuda", generator=g), dim=1)[:, :K].int()
    w = torch.softmax(torch.randn(T, K, device="cuda", generator=g), -1)
    dy = torch.randn(T, H, device="cuda", generator=g).bfloat16()
    return x, ids, w, dy


def reference_dw(w1, w2, mbs) -> tuple[np.ndarray, np.ndarray]:
    """float64 dW1, dW2 summed over the micro-batches."""
    refs = [moe_reference(f64(x)[None], f64(w1)[None], f64(w2)[None], ids.cpu().numpy()[None],
                          w.float().cpu().numpy()[None], f64(dy)[None]) for x, ids, w, dy in mbs]
    return sum(r["dw1"][0] for r in refs), sum(r["dw2"][0] for r in refs)


def assert_close(name: str, got, want: np.ndarray, budget: float) -> None:
    err = np.abs(f64(got) - want).max() / np.abs(want).max()
    assert err <= budget, f"{name}: max rel error {err:.3e} > {budget:.1e}"


def run_steps(m, mbs) -> None:
    for x, ids, w, dy in mbs:
        m(x, ids, w).backward(dy)


@needs_gpu
def test_fused_into_grad_writes_then_adds_and_matches_float64():
    from hpmoe.torch import MoEFFN
    torch.manual_seed(0)
    fused = MoEFFN(H, INTER, E, K, num_aic=8, num_aiv=4, fuse_wgrad_accumulation=True)
    plain = MoEFFN(H, INTER, E, K, num_aic=8, num_aiv=4)
    with torch.no_grad():
        plain.w1.copy_(fused.w1)
        plain.w2.copy_(fused.w2)
    mbs = [microbatch(1), microbatch(2)]
    run_steps(fused, mbs[:1])
    run_steps(plain, mbs[:1])
    # The first micro-step writes: one rounding of the fp32 accumulators, as the unfused path's.
    assert torch.equal(fused.w1.grad, plain.w1.grad) and torch.equal(fused.w2.grad, plain.w2.grad)
    run_steps(fused, mbs[1:])
    run_steps(plain, mbs[1:])  # autograd adds the second dW (rounded) to .grad: the same sum, bitwise
    assert torch.equal(fused.w1.grad, plain.w1.grad) and torch.equal(fused.w2.grad, plain.w2.grad)
    dw1, dw2 = reference_dw(fused.w1, fused.w2, mbs)
    assert_close("w1.grad", fused.w1.grad, dw1, 2 * BF16_BUDGET)
    assert_close("w2.grad", fused.w2.grad, dw2, 2 * BF16_BUDGET)
    fused.runtime.check()


@needs_gpu
def test_fused_into_main_grad_follows_megatrons_convention():
    from hpmoe.torch import MoEFFN
    torch.manual_seed(1)
    m = MoEFFN(H, INTER, E, K, num_aic=8, num_aiv=4, fuse_wgrad_accumulation=True)
    plain = MoEFFN(H, INTER, E, K, num_aic=8, num_aiv=4)
    start = [torch.randn(p.shape, device="cuda") for p in (m.w1, m.w2)]

    def move(t):  # Megatron's DDP hook where the add is not fused
        t.main_grad.add_(t.grad)
        t.grad = None

    for p, q, s in zip((m.w1, m.w2), (plain.w1, plain.w2), start):
        p.main_grad, q.main_grad = s.clone(), s.clone()
        with torch.no_grad():
            q.copy_(p)
        q.register_post_accumulate_grad_hook(move)
    m.w1.grad_added_to_main_grad = False  # Megatron's DDP: a placeholder gradient lets its hooks run
    mbs = [microbatch(3), microbatch(4)]
    run_steps(m, mbs)
    run_steps(plain, mbs)
    for name, a, b in (("w1", m.w1, plain.w1), ("w2", m.w2, plain.w2)):
        assert torch.equal(a.main_grad, b.main_grad), f"{name}.main_grad differs from the unfused path's"
    dw1, dw2 = reference_dw(m.w1, m.w2, mbs)
    assert_close("w1.main_grad", m.w1.main_grad - start[0], dw1, BF16_BUDGET)
    assert_close("w2.main_grad", m.w2.main_grad - start[1], dw2, BF16_BUDGET)
    assert m.w1.grad_added_to_main_grad is True and m.w1.grad is not None  # the placeholder
    assert m.w2.grad is None, "w2 has no grad_added_to_main_grad: autograd must get no gradient for it"


@needs_gpu
def test_fused_into_transformers_layout_and_graph_replay_equals_eager():
    """Parameters stored [E, 2I, h] / [E, h, I] and passed as transposes: three fused steps leave 3x the unfused
    path's gradient in the fp32 main_grad, exactly (a bf16 value times 3 is exact in fp32); a captured CUDA
    graph of the fused step replayed three times leaves the same bits as three eager steps."""
    from hpmoe.torch import MoeFfnRuntime, moe_ffn
    torch.manual_seed(2)
    rt = MoeFfnRuntime(H, INTER, E, K, num_aic=8, num_aiv=4)
    gate_up = (torch.randn(E, 2 * INTER, H, device="cuda") * H ** -0.5).bfloat16().requires_grad_()
    down = (torch.randn(E, H, INTER, device="cuda") * INTER ** -0.5).bfloat16().requires_grad_()
    x, ids, w, dy = microbatch(5)

    def fused_step():
        moe_ffn(x, ids, w, gate_up.transpose(1, 2), down.transpose(1, 2), rt, wgrad_into=(gate_up, down)).backward(dy)

    moe_ffn(x, ids, w, gate_up.transpose(1, 2), down.transpose(1, 2), rt).backward(dy)
    unfused = (gate_up.grad.clone(), down.grad.clone())
    gate_up.grad = down.grad = None
    for p in (gate_up, down):
        p.main_grad = torch.zeros(p.shape, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fused_step()
    torch.cuda.current_stream().wait_stream(s)
    eager = [p.main_grad.clone() for p in (gate_up, down)]
    for name, a, b in (("gate_up_proj", eager[0], unfused[0]), ("down_proj", eager[1], unfused[1])):
        assert torch.equal(a, 3 * b.float()), f"{name}: fused main_grad is not 3x the unfused gradient"
    assert gate_up.grad is None and down.grad is None
    for p in (gate_up, down):
        p.main_grad.zero_()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fused_step()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    rt.check()
    for name, a, p in (("gate_up_proj", eager[0], gate_up), ("down_proj", eager[1], down)):
        assert torch.equal(a, p.main_grad), f"{name}: graph replay differs from eager"


@needs_gpu
def test_fused_accumulation_refuses_buffers_it_cannot_add_to():
    from hpmoe.torch import MoEFFN, MoeFfnRuntime, moe_ffn
    m = MoEFFN(H, INTER, E, K, num_aic=8, num_aiv=4, fuse_wgrad_accumulation=True)
    x, ids, w, dy = microbatch(6)
    m.w1.main_grad = torch.zeros(m.w1.shape, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="w1's gradient buffer is torch.float16"):
        m(x, ids, w).backward(dy)
    m.w1.main_grad = torch.zeros(E, H, device="cuda")
    with pytest.raises(ValueError, match=r"w1's gradient buffer must be contiguous"):
        m(x, ids, w).backward(dy)
    rt = MoeFfnRuntime(H, INTER, E, K, num_aic=8, num_aiv=4)
    other = m.w1.detach().clone().requires_grad_()
    with pytest.raises(ValueError, match="w1 must be its parameter of wgrad_into"):
        moe_ffn(x, ids, w, m.w1, m.w2, rt, wgrad_into=(other, m.w2))
    with pytest.raises(TypeError, match="wgrad_into must be the two parameters"):
        moe_ffn(x, ids, w, m.w1, m.w2, rt, wgrad_into=m.w1)
