"""hpmoe.torch.MoEFFN on a GPU: forward output and every gradient (x, w1, w2, topk_weights) through
torch.autograd against the float64 reference; a backward whose saved state was overwritten is refused.
Under torchrun (one process per GPU, heaps mapped through CUDA IPC): EP 2 and 4 against the reference.
Skips with the reason when torch, the CUDA library or (enough) GPUs are missing."""
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


def f64(t) -> np.ndarray:
    return t.detach().double().cpu().numpy()


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_moeffn_forward_and_gradients_match_float64(dtype):
    from hpmoe.torch import MoEFFN
    torch.manual_seed(0)
    T, h, inter, E, k = 192, 128, 64, 4, 2
    m = MoEFFN(h, inter, E, k, dtype=dtype, num_aic=4, num_aiv=4)
    x = torch.randn(T, h, device="cuda").to(dtype).requires_grad_()
    ids = torch.stack([torch.randperm(E, device="cuda")[:k] for _ in range(T)]).int()
    w = torch.softmax(torch.randn(T, k, device="cuda"), -1).requires_grad_()
    dy = torch.randn(T, h, device="cuda").to(dtype)
    y = m(x, ids, w)
    y.backward(dy)
    ref = moe_reference(f64(x)[None], f64(m.w1)[None], f64(m.w2)[None], ids.cpu().numpy()[None],
                        w.detach().cpu().numpy()[None], f64(dy)[None])
    got = {"y": f64(y)[None], "dx": f64(x.grad)[None], "dw1": f64(m.w1.grad)[None], "dw2": f64(m.w2.grad)[None],
           "dtopk_weights": f64(w.grad)[None]}
    # dW1/dW2 are rounded once more to the parameter dtype (autograd wants the parameter's dtype): 1 u extra.
    name = {torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    bad = [f"{n}: {e:.3e} > {tol:.1e}" for n, e, tol, ok in compare(got, ref, name) if not ok]
    assert not bad, f"{dtype=}: " + "; ".join(bad)


@needs_gpu
def test_backward_after_overwritten_forward_is_refused():
    from hpmoe.torch import MoEFFN
    m = MoEFFN(64, 32, 2, 1, num_aic=2, num_aiv=2)
    x = torch.randn(64, 64, device="cuda").bfloat16().requires_grad_()
    ids = torch.zeros(64, 1, dtype=torch.int32, device="cuda")
    w = torch.ones(64, 1, device="cuda")
    y1 = m(x, ids, w)
    m(x, ids, w)  # the same shape bucket: overwrites what y1's backward needs
    with pytest.raises(RuntimeError, match="another forward of the same shape ran before this backward"):
        y1.sum().backward()



@pytest.mark.parametrize("ep", [2, 4])
def test_moeffn_over_torchrun_ep_group(ep):
    if gpu_count() < ep:
        pytest.skip(f"needs {ep} GPUs (one process per GPU), found {gpu_count()}")
    script = Path(__file__).with_name("moeffn_torchrun_check.py")
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ep), str(script)],
                         capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert f"ep={ep} second step bitwise identical: True" in res.stdout
