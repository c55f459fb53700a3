"""The MoE-FFN (Dispatch -> GMM -> SwiGLU -> GMM -> Combine) for PyTorch: `moe_ffn(...)` on any weights, and
`MoEFFN`, an nn.Module holding its own. Forward and backward are each one persistent-kernel launch of the
CUDA backend, enqueued on PyTorch's current stream, as the custom ops hpmoe::moe_ffn_fwd/bwd (ops.py):
torch.compile traces them without graph breaks; CUDA graphs capture them.

A call in a steady state does no host synchronisation and copies nothing: the routing plan is built on the
GPU from topk_ids (op_kernel/cuda/routing_plan.cuh), and x, topk_ids, the weights, y, dy, dx and the weight
gradients are used where PyTorch holds them (slots bound per launch, op_kernel/cuda/launch_binding.cuh).
Only what peers write (receive buffers, counters) and the expert-side intermediates live in hpmoe's heap.

Several forwards may be in flight before their backwards (pipeline schedules, gradient accumulation): each
forward leases one heap **generation** (a CudaGroup with its own heap and epochs) and holds it until its
backward ran (or, eagerly, until its autograd graph is dropped); generations are created on demand
and reused, so one in flight costs one heap, two cost two (`MoeFfnRuntime.generation_bytes()`); the slots
no launch keeps (workspace.py) are one copy that every generation of a shape uses (`workspace_bytes()`).

EP group: `group` (a torch.distributed process group; default the whole world when torch.distributed is
initialised, else a group of one). Each process is one rank on its current GPU (torchrun); heaps are mapped
through CUDA IPC; `topk_ids` hold global expert ids (expert e lives on rank e // num_local_experts); every
rank calls forward and backward together with the same number of tokens. At EP 1 the bucket holds every
possible routing (C = T * k), so nothing is ever synchronised. At EP > 1 the bucket is speculative (sized by
capacity_factor): the ranks agree on each forward's need inside its launch, a forward that does not fit runs
as passes of fewer tokens (right, slower), and the host grows the bucket some forwards later, never
synchronising (docs/cuda.md, "Routing beyond the bucket"); `sync_free=True` instead uses the bucket that
holds any routing (C = T * min(k, E_local), more heap, never passes); `speculative=False` agrees on the
bucket before each forward with an all_reduce and a host read (one sync per forward).

A launch that fails (a stuck wait, an expert id out of range) marks mapped host memory; the next call raises
a one-line error (`MoeFfnRuntime.check()` raises it at once, with a sync). A refused routing leaves NaN in y.
"""
from __future__ import annotations

import torch

from . import ops
from .runtime import MoeFfnRuntime
from .wgrad import check_params


def _check_inputs(rt: MoeFfnRuntime, x, topk_ids, topk_weights, w1, w2) -> None:
    for name, t in (("x", x), ("topk_ids", topk_ids), ("topk_weights", topk_weights), ("w1", w1), ("w2", w2)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"hpmoe moe_ffn: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.device != rt.device:
            raise ValueError(f"hpmoe moe_ffn: {name} is on {t.device}, the op runs on {rt.device}")
    T, h, I, E, k = x.shape[0], rt.hidden, rt.inter, rt.experts, rt.topk
    expect = {"x": (x, (T, h)), "topk_ids": (topk_ids, (T, k)), "topk_weights": (topk_weights, (T, k)),
              "w1": (w1, (E, h, 2 * I)), "w2": (w2, (E, I, h))}
    for name, (t, shape) in expect.items():
        if tuple(t.shape) != shape:
            raise ValueError(f"hpmoe moe_ffn: {name} must have shape {list(shape)}, got {list(t.shape)}")
    if x.dtype != rt.dtype:
        raise ValueError(f"hpmoe moe_ffn: x is {x.dtype}, the op was built for {rt.dtype} (enable autocast to "
                         f"{rt.dtype} or convert x)")
    for name, t in (("w1", w1), ("w2", w2)):
        if t.dtype != rt.dtype:
            raise ValueError(f"hpmoe moe_ffn: {name} is {t.dtype}, the op was built for {rt.dtype}")
    if topk_ids.dtype not in (torch.int32, torch.int64) or not topk_weights.is_floating_point():
        raise ValueError(f"hpmoe moe_ffn: topk_ids must be int32/int64 and topk_weights floating point, got "
                         f"{topk_ids.dtype} and {topk_weights.dtype}")


def moe_ffn(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, w1: torch.Tensor,
            w2: torch.Tensor, runtime: MoeFfnRuntime, *, wgrad_into: tuple | None = None) -> torch.Tensor:
    """y [T, h] = sum_j topk_weights[t, j] * (silu(x W1g[e]) * (x W1u[e])) W2[e], e = topk_ids[t, j].
    w1 [E_local, h, 2I] (gate | up) and w2 [E_local, I, h], contiguous or transpose views of the layouts
    transformers stores ([E, 2I, h] / [E, h, I]; both read in place, other strides copied). Differentiable in
    x, topk_weights, w1 and w2. Under autocast a floating x is cast to the op's dtype, as autocast ops do.

    wgrad_into=(p1, p2), the parameters w1 and w2 are (or are transposes of): the backward kernel adds the
    weight gradients to p.main_grad, else p.grad, in its epilogue, and autograd gets none for w1/w2
    (hpmoe.torch.wgrad: the convention, and what does not see them)."""
    if x.dtype != runtime.dtype and x.is_floating_point() and torch.is_autocast_enabled(x.device.type):
        x = x.to(runtime.dtype)
    _check_inputs(runtime, x, topk_ids, topk_weights, w1, w2)
    if not torch.compiler.is_compiling():
        if wgrad_into is not None:
            check_params(wgrad_into, ops._stored_weights(w1, w2)[1:])
        return ops.EagerMoeFfn.apply(x, topk_weights, w1, w2, topk_ids, runtime, wgrad_into)
    keep = torch.is_grad_enabled() and any(t.requires_grad for t in (x, topk_weights, w1, w2))
    return ops.moe_ffn_fwd(x, topk_ids, topk_weights, w1, w2, runtime.id, keep)[0]


class MoEFFN(torch.nn.Module):
    """The MoE-FFN with its own expert weights w1 [E_local, h, 2I] (gate | up) and w2 [E_local, I, h]."""

    def __init__(self, hidden_size: int, intermediate_size: int, num_local_experts: int, topk: int, *,
                 group=None, capacity_factor: float | None = None, dtype: torch.dtype = torch.bfloat16,
                 tile_m: int | None = None, num_aic: int | None = None, num_aiv: int | None = None,
                 wgrad_tile: int = 0, token_tile: int = 0, sync_free: bool = False, timeout_s: float = 60.0,
                 device=None, wgrad_n_block: int | None = None, fuse_swiglu: bool | None = None,
                 expert_aligned: bool | None = None, fuse_wgrad_accumulation: bool = False,
                 first_gmm_pool: bool | None = None, speculative: bool | None = None):
        super().__init__()
        # The backward adds the weight gradients to w1/w2's main_grad, else .grad, itself (wgrad.py).
        self.fuse_wgrad_accumulation = fuse_wgrad_accumulation
        self.runtime = MoeFfnRuntime(hidden_size, intermediate_size, num_local_experts, topk, group=group,
                                     capacity_factor=capacity_factor, dtype=dtype, tile_m=tile_m, num_aic=num_aic,
                                     num_aiv=num_aiv, wgrad_tile=wgrad_tile, token_tile=token_tile,
                                     sync_free=sync_free, timeout_s=timeout_s, device=device,
                                     wgrad_n_block=wgrad_n_block, fuse_swiglu=fuse_swiglu,
                                     expert_aligned=expert_aligned, first_gmm_pool=first_gmm_pool,
                                     speculative=speculative)
        device = self.runtime.device
        self.w1 = torch.nn.Parameter(torch.randn(num_local_experts, hidden_size, 2 * intermediate_size,
                                                 device=device).mul_(hidden_size ** -0.5).to(dtype))
        self.w2 = torch.nn.Parameter(torch.randn(num_local_experts, intermediate_size, hidden_size,
                                                 device=device).mul_(intermediate_size ** -0.5).to(dtype))

    @property
    def ep(self) -> int:
        return self.runtime.ep

    @property
    def rank(self) -> int:
        return self.runtime.rank

    def forward(self, x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor) -> torch.Tensor:
        return moe_ffn(x, topk_ids, topk_weights, self.w1, self.w2, self.runtime,
                       wgrad_into=(self.w1, self.w2) if self.fuse_wgrad_accumulation else None)
