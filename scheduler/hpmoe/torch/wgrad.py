"""Fused weight-gradient accumulation: the backward kernel adds dW1/dW2 to the parameters' gradient buffers in
its epilogue (kDwAccumulate, op_kernel/cuda/handlers_gemm.cuh) instead of returning them for autograd to add.
Autograd's `grad += dw` reads dW and the buffer and writes the buffer once more: 3.3 of the 3.7 ms between
Qwen3-235B's user step and its kernels on one H200 (benchmarks/cuda_step_profile.py); the PyTorch path pays it too.

The sum is old + dW rounded to the model dtype, added in fp32 (and, into a 16-bit buffer, rounded): bitwise
what autograd's add into .grad, or Megatron's `main_grad.add_(grad)`, leaves
(tests/cuda/test_torch_wgrad_accumulation.py). Where the gradient goes, per parameter (the
`fuse_wgrad_accumulation` convention of Megatron-Core and TransformerEngine): `p.main_grad` when the
parameter has one (fp32 or the model dtype), else `p.grad`
(allocated and written, not added, when no parameter has one yet). Autograd then gets no gradient for the
weights, except that a parameter carrying `grad_added_to_main_grad` (Megatron's DDP) has it set to True and
gets an uninitialised placeholder gradient, so the hooks that DDP runs on gradient accumulation still fire.
Because autograd never sees dW, `torch.autograd.grad(..., inputs=w1)` and hooks on w1/w2 do not either; the
option is for training loops that read `.grad` / `main_grad`. Under torch.compile it is not applied (the
custom op returns the gradients as usual, so the results are the same, unfused).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class WgradTargets:
    """Where one backward puts dW1/dW2: two contiguous tensors in the weights' stored layout."""
    dw1: torch.Tensor
    dw2: torch.Tensor
    model_dtype: bool  # the targets hold the model dtype (else fp32)
    accumulate: bool   # add to what they hold (else write)


def check_params(params, stored: tuple[torch.Tensor, torch.Tensor]) -> None:
    """One-line errors at forward time: `params` must be the parameters w1 and w2 are (or are transpose views
    of), stored as the op reads them, so a gradient in the stored layout is theirs element for element."""
    if not isinstance(params, (tuple, list)) or len(params) != 2:
        raise TypeError("hpmoe moe_ffn: wgrad_into must be the two parameters (w1's, w2's), got "
                        f"{type(params).__name__}")
    for name, p, s in (("w1", params[0], stored[0]), ("w2", params[1], stored[1])):
        if not isinstance(p, torch.Tensor):
            raise TypeError(f"hpmoe moe_ffn: wgrad_into's {name} parameter must be a tensor, got {type(p).__name__}")
        if not p.is_contiguous() or s.data_ptr() != p.data_ptr() or s.shape != p.shape:
            raise ValueError(f"hpmoe moe_ffn: {name} must be its parameter of wgrad_into, contiguous, or that "
                             f"parameter's transpose(1, 2) (got {name} {list(s.shape)} at another address or layout "
                             f"than the parameter {list(p.shape)})")


def resolve(params, dtype: torch.dtype) -> WgradTargets:
    """The buffers this backward adds to (or writes): main_grad, else .grad, else a new .grad."""
    held = [getattr(p, "main_grad", None) for p in params]
    held = [t if t is not None else p.grad for t, p in zip(held, params)]
    accumulate = any(t is not None for t in held)
    for i, p in enumerate(params):
        if held[i] is None:  # the first micro-step: written, or zeros beside a buffer that already holds some
            p.grad = torch.zeros_like(p) if accumulate else torch.empty_like(p)
            held[i] = p.grad
    for name, t, p in (("w1", held[0], params[0]), ("w2", held[1], params[1])):
        if t.shape != p.shape or not t.is_contiguous() or t.device != p.device:
            raise ValueError(f"hpmoe moe_ffn: {name}'s gradient buffer must be contiguous, {list(p.shape)}, on "
                             f"{p.device}; got {list(t.shape)} on {t.device}")
        if t.dtype not in (torch.float32, dtype) or t.dtype != held[0].dtype:
            raise ValueError(f"hpmoe moe_ffn: {name}'s gradient buffer is {t.dtype}: fused accumulation adds into "
                             f"float32 or {dtype}, the same for w1 and w2 (got {held[0].dtype} and {held[1].dtype})")
    return WgradTargets(held[0], held[1], held[0].dtype != torch.float32, accumulate)


def autograd_grads(params, weights: tuple[torch.Tensor, torch.Tensor]) -> tuple:
    """What backward returns for w1/w2 after the kernel added their gradients: None, or, for parameters of
    Megatron's DDP (grad_added_to_main_grad), a placeholder that lets its accumulation hooks run."""
    out = []
    for p, w in zip(params, weights):
        if hasattr(p, "grad_added_to_main_grad"):
            p.grad_added_to_main_grad = True
            out.append(torch.empty_like(w, memory_format=torch.contiguous_format))
        else:
            out.append(None)
    return tuple(out)
