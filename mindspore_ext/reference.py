"""The MoE-FFN from standard MindSpore ops that run on CPU: the path hpmoe is validated and timed against.

Per rank: every local expert e computes all gathered rows densely (ops.bmm over [E_local, N, h]), SwiGLU,
ops.bmm, then each row is weighted by its routing weight for e (0 where it did not pick e) and summed. Across
ranks the token exchange is built from AllGather (the only collective that runs on CPU in MindSpore 2.10):
rows go to every rank (_GatherRows), partial outputs come back summed (_ScatterSum); each has a bprop made of
AllGather too, since AllGather's own bprop (ReduceScatter) does not run on CPU. Dense-masked costs
ep * T * E_local rows per rank instead of T * k, which is why it is the simplest correct reference, not the
fastest one; GroupedMatmul, Swiglu, MoeTokenPermute and friends are not registered on CPU.
"""
from __future__ import annotations

import mindspore as ms
from mindspore import nn, ops


class _GatherRows(nn.Cell):
    """[T, ...] on each rank -> [ep*T, ...] everywhere; gradient: the sum over ranks of each rank's rows."""

    def __init__(self, group, ep, rank):
        super().__init__()
        self.ep, self.rank = ep, rank
        self.gather = ops.AllGather(group)

    def construct(self, x):
        return self.gather(x)

    def bprop(self, x, out, dout):
        t = x.shape[0]
        g = self.gather(dout).reshape((self.ep, self.ep * t) + x.shape[1:])
        return (g[:, self.rank * t:(self.rank + 1) * t].sum(0),)


class _ScatterSum(nn.Cell):
    """[ep*T, ...] partial sums on each rank -> this rank's [T, ...] summed over ranks (fixed order)."""

    def __init__(self, group, ep, rank):
        super().__init__()
        self.ep, self.rank = ep, rank
        self.gather = ops.AllGather(group)

    def construct(self, y):
        t = y.shape[0] // self.ep
        g = self.gather(y).reshape((self.ep,) + y.shape)
        return g[:, self.rank * t:(self.rank + 1) * t].sum(0)

    def bprop(self, y, out, dout):
        return (self.gather(dout),)


class ReferenceMoEFFN(nn.Cell):
    """construct(x, topk_ids, topk_weights, w1, w2) -> y, the same contract as HyperParallelMoEFFN's core.
    Computes in `compute_dtype` (float32 by default: CPU bf16 lacks ReduceSum, MatMul and AddN)."""

    def __init__(self, num_local_experts, topk, *, ep=1, rank=0, group=None, compute_dtype=ms.float32):
        super().__init__()
        self.ep, self.rank, self.experts, self.topk = ep, rank, num_local_experts, topk
        self.compute_dtype = compute_dtype
        self.local_ids = ms.Tensor([rank * num_local_experts + e for e in range(num_local_experts)], ms.int32)
        if ep > 1:
            self.gather_rows = _GatherRows(group, ep, rank)
            self.gather_ids = ops.AllGather(group)
            self.scatter_sum = _ScatterSum(group, ep, rank)

    def construct(self, x, topk_ids, topk_weights, w1, w2):
        out_dtype = x.dtype
        x = x.astype(self.compute_dtype)
        weights = topk_weights.astype(self.compute_dtype)
        w1 = w1.astype(self.compute_dtype)
        w2 = w2.astype(self.compute_dtype)
        if self.ep > 1:
            x = self.gather_rows(x)
            weights = self.gather_rows(weights)
            topk_ids = self.gather_ids(topk_ids)
        inter = w2.shape[1]
        picked = (topk_ids.expand_dims(2) == self.local_ids.reshape((1, 1, -1))).astype(self.compute_dtype)
        gate = (weights.expand_dims(2) * picked).sum(1)                     # [N, E_local]
        xb = ops.broadcast_to(x.expand_dims(0), (self.experts,) + x.shape)  # [E_local, N, h]
        h = ops.bmm(xb, w1)
        a = ops.silu(h[:, :, :inter]) * h[:, :, inter:]
        y = (ops.bmm(a, w2) * gate.transpose(1, 0).expand_dims(2)).sum(0)  # [N, h]
        if self.ep > 1:
            y = self.scatter_sum(y)
        return y.astype(out_dtype)


class StandardMoEFFN(nn.Cell):
    """Drop-in twin of HyperParallelMoEFFN on the standard path (same parameters w1, w2 and call), for the
    training comparison (examples/train_moe.py)."""

    def __init__(self, hidden_size, intermediate_size, num_local_experts, topk, *, dtype=ms.float32, ep=1,
                 rank=0, group=None):
        super().__init__()
        from mindspore import Parameter
        from mindspore.common.initializer import Normal, initializer

        h, inter, e = hidden_size, intermediate_size, num_local_experts
        self.w1 = Parameter(initializer(Normal(h ** -0.5), [e, h, 2 * inter], dtype), name="w1")
        self.w2 = Parameter(initializer(Normal(inter ** -0.5), [e, inter, h], dtype), name="w2")
        self.moe = ReferenceMoEFFN(e, topk, ep=ep, rank=rank, group=group)

    def construct(self, x, topk_ids, topk_weights):
        return self.moe(x, topk_ids, topk_weights, self.w1, self.w2)
