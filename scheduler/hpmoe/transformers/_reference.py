"""A pure-PyTorch stand-in for `hpmoe.torch.moe_ffn` / `MoeFfnRuntime` with the same signatures and math, for
CPU development and CPU tests of hpmoe.transformers (no kernel, no speed meaning).

    y[t] = sum_j topk_weights[t, j] * (silu(x W1g[e]) * (x W1u[e])) W2[e],  e = topk_ids[t, j]

Computed in float32 per expert, returned in x's dtype. Expert parallelism as the real op defines it (expert e
lives on rank e // num_local_experts of the group, every rank passes the same number of tokens), done
naively: every rank's tokens are summed into one [ep * T] buffer with an autograd all_reduce, each rank adds
its own experts' outputs for all of them, and a second all_reduce returns each rank its rows.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class MoeFfnRuntime:
    def __init__(self, hidden_size: int, intermediate_size: int, num_local_experts: int, topk: int, *,
                 group=None, dtype: torch.dtype = torch.bfloat16, capacity_factor: float | None = None,
                 device=None):
        distributed = dist.is_available() and dist.is_initialized()
        self.group = group if group is not None or not distributed else dist.group.WORLD
        self.ep = dist.get_world_size(self.group) if distributed else 1
        self.rank = dist.get_rank(self.group) if distributed else 0
        self.hidden, self.inter, self.experts, self.topk = hidden_size, intermediate_size, num_local_experts, topk
        self.dtype = dtype

    def bucket_stats(self) -> dict:  # the stand-in keeps no buckets: every call runs whole
        return {"buckets": [], "overflows_seen": 0, "overflow_waits": 0, "group_seconds": 0.0, "group_parts": {}}


def _gather_rows(t: torch.Tensor, rt: MoeFfnRuntime) -> torch.Tensor:
    """[T, ...] -> [ep * T, ...] with rank r's rows at r*T (the same on every rank), differentiable."""
    if rt.ep == 1:
        return t
    rows, rest = t.shape[0], tuple(t.shape[1:])
    full = torch.cat([t.new_zeros((rt.rank * rows,) + rest), t, t.new_zeros(((rt.ep - rt.rank - 1) * rows,) + rest)])
    if not t.requires_grad:
        dist.all_reduce(full, group=rt.group)
        return full
    from torch.distributed.nn.functional import all_reduce
    return all_reduce(full, group=rt.group)


def moe_ffn(x, topk_ids, topk_weights, w1, w2, rt: MoeFfnRuntime) -> torch.Tensor:
    T, h = x.shape
    if x.dtype != rt.dtype or h != rt.hidden or tuple(w1.shape) != (rt.experts, h, 2 * rt.inter) \
            or tuple(w2.shape) != (rt.experts, rt.inter, h) or topk_ids.shape != (T, rt.topk):
        raise ValueError(f"moe_ffn: shapes/dtypes do not match the runtime: x {list(x.shape)} {x.dtype}, w1 "
                         f"{list(w1.shape)}, w2 {list(w2.shape)}, topk_ids {list(topk_ids.shape)}")
    xs = _gather_rows(x, rt).float()
    ids = _gather_rows(topk_ids.long(), rt)
    ws = _gather_rows(topk_weights, rt).float()
    if ids.numel() and (ids.min() < 0 or ids.max() >= rt.ep * rt.experts):
        raise ValueError(f"topk_ids must lie in [0, {rt.ep * rt.experts}), got [{ids.min()}, {ids.max()}]")
    y = xs.new_zeros(xs.shape)
    for e in range(rt.experts):
        tok, j = torch.nonzero(ids == rt.rank * rt.experts + e, as_tuple=True)
        if tok.numel() == 0:
            continue
        gate, up = (xs[tok] @ w1[e].float()).chunk(2, dim=-1)
        out = (F.silu(gate) * up) @ w2[e].float()
        y = y.index_add(0, tok, out * ws[tok, j, None])
    if rt.ep > 1:
        from torch.distributed.nn.functional import all_reduce
        y = all_reduce(y, group=rt.group)[rt.rank * T:(rt.rank + 1) * T]
    return y.to(x.dtype)
