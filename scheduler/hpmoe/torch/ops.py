"""hpmoe's MoE-FFN as PyTorch custom ops (torch.library), so torch.compile traces it without graph breaks
and autograd, CUDA graphs and autocast treat it as any other op:

  hpmoe::moe_ffn_fwd(x, topk_ids, topk_weights, w1, w2, runtime, keep) -> (y, token)
  hpmoe::moe_ffn_bwd(dy, token, topk_weights, w1, w2, runtime, x, topk_ids) -> (dx, d_topk_weights, dw1, dw2)

Each is one persistent-kernel launch on PyTorch's current stream (plus the small bind and routing-plan
kernels), no host sync, no copies (docs/cuda.md, "The PyTorch op"). `runtime` names a MoeFfnRuntime.
At EP > 1 with the speculative bucket a call also enqueues the passes that run only if its routing overflowed
the bucket (docs/cuda.md, "Routing beyond the bucket"); their backward recomputes each pass's forward, so it
takes x and topk_ids too (None otherwise).
`token` (a CPU int64 scalar) names the heap generation the forward left its saved state in; the backward
releases it (under torch.compile a graph dropped without backward keeps its generation). Outside
torch.compile, `moe_ffn` runs the same implementation through `EagerMoeFfn`, an autograd.Function whose
context holds the generation.
"""
from __future__ import annotations

import torch

from ..ssc_format import Slot
from .runtime import _LEASES, _RUNTIMES, LeaseHold, MoeFfnRuntime
from .wgrad import WgradTargets, autograd_grads, resolve


def _stream(rt: MoeFfnRuntime) -> int:
    return torch.cuda.current_stream(rt.device).cuda_stream


def _stored_weights(w1: torch.Tensor, w2: torch.Tensor) -> tuple[bool, torch.Tensor, torch.Tensor]:
    """(transposed, w1 as stored, w2 as stored). Weights given as transpose views of [E, 2I, h] / [E, h, I]
    tensors (nn.Linear's and transformers' layout) are read in place with a transposed-layout schedule;
    contiguous [E, h, 2I] / [E, I, h] in place with the standard one; anything else through a copy."""
    if w1.is_contiguous() and w2.is_contiguous():
        return False, w1, w2
    s1, s2 = w1.transpose(1, 2), w2.transpose(1, 2)
    if s1.is_contiguous() and s2.is_contiguous():
        return True, s1, s2
    return False, w1.contiguous(), w2.contiguous()


def _runtime(runtime: int) -> MoeFfnRuntime:
    rt = _RUNTIMES.get(runtime)
    if rt is None:
        raise RuntimeError(f"hpmoe moe_ffn: runtime {runtime} no longer exists (its MoeFfnRuntime was freed)")
    return rt


def _fwd_impl(x, topk_ids, topk_weights, w1, w2, rt: MoeFfnRuntime, keep: bool):
    """(y, the generation holding this forward's saved state if `keep`, else None)."""
    rt.poll()
    T = x.shape[0]
    if T == 0:  # nothing to route; every rank of a group passes the same T, so no rank launches
        return x.new_empty((0, rt.hidden)), None
    x = x.contiguous()
    ids = topk_ids.to(torch.int32).contiguous()
    weights = topk_weights.to(torch.float32).contiguous()
    transposed, w1c, w2c = _stored_weights(w1, w2)
    lease = rt.lease(T, ids, transposed)
    y = torch.empty_like(x)
    bound = {Slot.X: x.data_ptr(), Slot.TOPK_IDS: ids.data_ptr(), Slot.TOPK_WEIGHTS: weights.data_ptr(),
             Slot.W1: w1c.data_ptr(), Slot.W2: w2c.data_ptr(), Slot.Y: y.data_ptr()}
    lease.group.launch(rt.rank, "fwd", _stream(rt), bound, plan=True, timeout_s=rt.timeout_s, timed=rt.call_mark(),
                       run_if="speculate" if rt.speculative else "always",
                       need_out=rt.need_slot() if rt.speculative else 0)
    if rt.speculative:
        _forward_passes(rt, lease, bound)
        rt.note_forward(lease.key)
    rt.last_launch["fwd"] = lease.group
    if not keep:
        lease.release()  # the next forward may reuse the heap: it runs after this one on the stream
        return y, None
    return y, lease


def _forward_passes(rt: MoeFfnRuntime, lease, bound: dict) -> None:
    """The passes of an overflowed speculative forward: each routes a token range whose rows fit the bucket
    whatever the routing, and writes its tokens' rows of Y. Nothing runs unless the forward overflowed."""
    ranges = rt.passes(lease.key)
    for i, tokens in enumerate(ranges):
        lease.group.launch(rt.rank, "fwd", _stream(rt), bound, plan=True, timeout_s=rt.timeout_s,
                           timed=rt.pass_mark(i, len(ranges)), run_if="overflow",
                           tokens=tokens)


@torch.library.custom_op("hpmoe::moe_ffn_fwd", mutates_args=(), device_types="cuda")
def moe_ffn_fwd(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, w1: torch.Tensor,
                w2: torch.Tensor, runtime: int, keep: bool) -> tuple[torch.Tensor, torch.Tensor]:
    y, lease = _fwd_impl(x, topk_ids, topk_weights, w1, w2, _runtime(runtime), keep)
    return y, torch.tensor(lease.keep() if lease is not None else -1, dtype=torch.int64)


@moe_ffn_fwd.register_fake
def _(x, topk_ids, topk_weights, w1, w2, runtime, keep):
    return torch.empty_like(x), torch.empty((), dtype=torch.int64, device="cpu")


def _bwd_impl(dy, lease, topk_weights, w1, w2, rt: MoeFfnRuntime, into: WgradTargets | None = None, x=None,
              topk_ids=None):
    """(dx, d topk_weights, dw1, dw2); with `into`, the kernel adds (or writes) the weight gradients there
    and dw1/dw2 are None (wgrad.py). x and topk_ids: the forward's, for the passes of a speculative bucket."""
    T = dy.shape[0]
    if T == 0:
        dw = (None, None) if into is not None else (torch.zeros_like(w1), torch.zeros_like(w2))
        return (dy.new_empty((0, rt.hidden)), topk_weights.new_empty((0, rt.topk)), *dw)
    rt.poll()
    if lease is None or lease.group is None:
        raise RuntimeError("hpmoe moe_ffn: no saved state for this backward: a second backward through one forward "
                           "(retain_graph) is not supported, and a forward run without gradients saves nothing")
    dy = dy.to(rt.dtype).contiguous()
    weights = topk_weights.to(torch.float32).contiguous()
    transposed, w1c, w2c = _stored_weights(w1, w2)
    dx = torch.empty_like(dy)
    if into is None:
        dw1 = torch.empty(w1c.shape, dtype=rt.dtype, device=dy.device)  # in the weights' stored layout
        dw2 = torch.empty(w2c.shape, dtype=rt.dtype, device=dy.device)
        model_dtype, accumulate = True, False
    else:
        dw1, dw2, model_dtype, accumulate = into.dw1, into.dw2, into.model_dtype, into.accumulate
    dtw = torch.empty((T, rt.topk), dtype=torch.float32, device=dy.device)
    bound = {Slot.DY: dy.data_ptr(), Slot.TOPK_WEIGHTS: weights.data_ptr(), Slot.W1: w1c.data_ptr(),
             Slot.W2: w2c.data_ptr(), Slot.DX: dx.data_ptr(), Slot.DW1: dw1.data_ptr(), Slot.DW2: dw2.data_ptr(),
             Slot.DTOPK_WEIGHTS: dtw.data_ptr()}
    lease.group.launch(rt.rank, "bwd", _stream(rt), bound, dw_half=model_dtype, dw_accumulate=accumulate,
                       timeout_s=rt.timeout_s, timed=rt.call_mark(),
                       run_if="no_overflow" if rt.speculative else "always")
    if rt.speculative:
        if x is None or topk_ids is None:
            raise RuntimeError("hpmoe moe_ffn: a speculative-bucket backward needs the forward's x and topk_ids")
        # The passes of an overflowed forward (nothing runs otherwise): each recomputes its tokens' forward into
        # this generation (what the forward saved is the last pass's) and runs their backward; the first pass
        # writes the weight gradients as the call asks, the others add theirs. The recomputed Y rows go to dx,
        # whose rows of those tokens the pass's backward then writes.
        ids = topk_ids.to(torch.int32).contiguous()
        fwd_bound = {Slot.X: x.contiguous().data_ptr(), Slot.TOPK_IDS: ids.data_ptr(),
                     Slot.TOPK_WEIGHTS: weights.data_ptr(), Slot.W1: w1c.data_ptr(), Slot.W2: w2c.data_ptr(),
                     Slot.Y: dx.data_ptr()}
        ranges = rt.passes(lease.key)
        for i, tokens in enumerate(ranges):
            lease.group.launch(rt.rank, "fwd", _stream(rt), fwd_bound, plan=True, timeout_s=rt.timeout_s,
                               run_if="overflow", tokens=tokens)
            lease.group.launch(rt.rank, "bwd", _stream(rt), bound, dw_half=model_dtype,
                               dw_accumulate=accumulate or i > 0, timeout_s=rt.timeout_s, run_if="overflow",
                               tokens=tokens, timed=rt.pass_mark(i, len(ranges)))
    rt.last_launch["bwd"] = lease.group
    lease.release()  # the next forward may reuse this heap: it runs after this backward on the stream
    if into is not None:
        return dx, dtw.to(topk_weights.dtype), None, None
    if transposed:  # gradients of the [E, h, 2I] / [E, I, h] views, stored as their parameters are
        dw1, dw2 = dw1.transpose(1, 2), dw2.transpose(1, 2)
    return dx, dtw.to(topk_weights.dtype), dw1, dw2


@torch.library.custom_op("hpmoe::moe_ffn_bwd", mutates_args=(), device_types="cuda")
def moe_ffn_bwd(dy: torch.Tensor, token: torch.Tensor, topk_weights: torch.Tensor, w1: torch.Tensor,
                w2: torch.Tensor, runtime: int, x: torch.Tensor | None = None, topk_ids: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    return _bwd_impl(dy, _LEASES.get(int(token)), topk_weights, w1, w2, _runtime(runtime), x=x, topk_ids=topk_ids)


@moe_ffn_bwd.register_fake
def _(dy, token, topk_weights, w1, w2, runtime, x=None, topk_ids=None):
    transposed, w1c, w2c = _stored_weights(w1, w2)
    dw1, dw2 = torch.empty_like(w1c, memory_format=torch.contiguous_format), torch.empty_like(
        w2c, memory_format=torch.contiguous_format)
    if transposed:
        dw1, dw2 = dw1.transpose(1, 2), dw2.transpose(1, 2)
    return torch.empty_like(dy), torch.empty_like(topk_weights), dw1, dw2


def _setup_context(ctx, inputs, output):
    x, topk_ids, topk_weights, w1, w2, runtime, keep = inputs
    ctx.runtime = runtime
    passes = _runtime(runtime).speculative  # the passes' backward recomputes from x and topk_ids
    ctx.save_for_backward(output[1], topk_weights, w1, w2, x if passes else None, topk_ids if passes else None)


def _backward(ctx, dy, _dtoken):
    token, topk_weights, w1, w2, x, topk_ids = ctx.saved_tensors
    dx, dtw, dw1, dw2 = moe_ffn_bwd(dy, token, topk_weights, w1, w2, ctx.runtime, x, topk_ids)
    return dx, None, dtw, dw1, dw2, None, None


moe_ffn_fwd.register_autograd(_backward, setup_context=_setup_context)


class EagerMoeFfn(torch.autograd.Function):
    """The same two launches outside torch.compile, without the custom-op dispatch (about 0.1 ms of host
    time per call less, measured: benchmarks/cuda_host_profile.py). The context holds the generation, so a
    graph dropped without backward gives it back; under activation checkpointing the recomputed forward's
    generation is dropped with its context and backward uses this one (same inputs, same state)."""

    @staticmethod
    def forward(ctx, x, topk_weights, w1, w2, topk_ids, rt: MoeFfnRuntime, wgrad_into=None):
        y, lease = _fwd_impl(x, topk_ids, topk_weights, w1, w2, rt, any(ctx.needs_input_grad[:4]))
        ctx.rt, ctx.hold = rt, LeaseHold(lease)
        # Fused accumulation (wgrad.py) where the weights need gradients; their parameters, checked by moe_ffn.
        ctx.wgrad_into = wgrad_into if wgrad_into is not None and all(ctx.needs_input_grad[2:4]) else None
        passes = rt.speculative  # the passes' backward recomputes from x and topk_ids
        ctx.save_for_backward(topk_weights, w1, w2, x if passes else None, topk_ids if passes else None)
        return y

    @staticmethod
    def backward(ctx, dy):
        topk_weights, w1, w2, x, topk_ids = ctx.saved_tensors
        into = resolve(ctx.wgrad_into, ctx.rt.dtype) if ctx.wgrad_into is not None else None
        dx, dtw, dw1, dw2 = _bwd_impl(dy, ctx.hold.lease, topk_weights, w1, w2, ctx.rt, into, x, topk_ids)
        if into is not None:
            dw1, dw2 = autograd_grads(ctx.wgrad_into, (w1, w2))
        return dx, dtw, dw1, dw2, None, None, None
