"""The differentiable core of HyperParallelMoEFFN on the NPU route: host steps (pyfunc), the count AllGather,
then the aclnn op HyperParallelMoe (ascend_route.build_custom_op) forward; its backward as the cell's bprop.
Same contract as the CPU twin's core: construct(x, topk_ids, topk_weights, w1, w2). PyNative and GRAPH.

The core returns the routing plan next to y: bprop receives the forward's outputs, and the backward launch needs
the forward's plan (recomputing it would cost a second host pass). Nothing here has run on an NPU."""
from __future__ import annotations

from mindspore import Tensor, nn, ops
from mindspore.common import dtype as mstype

from . import ascend_route
from .npu_host import NpuHostState


class NpuMoeFunction(nn.Cell):
    def __init__(self, host: NpuHostState, group: str):
        super().__init__()
        cfg = host.cfg
        ep, C, E, T, k = cfg.ep, cfg.recv_rows_per_src, cfg.experts_per_rank, cfg.tokens, cfg.topk
        self.ep = ep
        i32 = mstype.int32
        self.count_rows = ops.Custom(host.count_rows, out_shape=lambda ids: [ep], out_dtype=lambda ids: i32,
                                     func_type="pyfunc")
        self.plan = ops.Custom(host.plan, out_shape=lambda ids, rows: ([ep, C], [ep, E], [T, k], [1]),
                               out_dtype=lambda ids, rows: (i32, i32, i32, mstype.int64), func_type="pyfunc")
        self.backward_epoch = ops.Custom(host.backward_epoch, out_shape=lambda rows: [1],
                                         out_dtype=lambda rows: mstype.int64, func_type="pyfunc")
        if ep > 1:
            self.all_gather = ops.AllGather(group)  # on the EP group: the op's own windows stay untouched
        self.ssc_fwd = Tensor(host.ssc["fwd"])
        self.ssc_bwd = Tensor(host.ssc["bwd"])
        self.forward_op = ascend_route.build_custom_op(host.attrs(0))
        self.backward_op = ascend_route.build_custom_op(host.attrs(1))

    def construct(self, x, topk_ids, topk_weights, w1, w2):
        rows = self.count_rows(topk_ids)
        if self.ep > 1:
            rows = self.all_gather(rows)  # the group agrees on the counts before any data moves
        send_rows, send_counts, token_rows, epoch = self.plan(topk_ids, rows)
        out = self.forward_op(x, w1, w2, topk_ids, topk_weights.astype(mstype.float32), None, send_rows,
                              send_counts, token_rows, self.ssc_fwd, epoch)
        return out[0], send_rows, send_counts, token_rows

    def bprop(self, x, topk_ids, topk_weights, w1, w2, out, dout):
        y, send_rows, send_counts, token_rows = out
        epoch = self.backward_epoch(token_rows)
        # The backward reads what the forward launch saved in the windows, but no input of it is the forward's
        # output (dy need not depend on y): without this edge a graph may launch it first.
        dy = ops.depend(dout[0], y)
        _, dx, dw1, dw2, dweights = self.backward_op(x, w1, w2, topk_ids, topk_weights.astype(mstype.float32),
                                                     dy, send_rows, send_counts, token_rows, self.ssc_bwd, epoch)
        # The op's weight and router gradients are fp32; MindSpore wants them in the parameters' dtypes.
        return (dx, ops.zeros_like(topk_ids), dweights.astype(topk_weights.dtype), dw1.astype(w1.dtype),
                dw2.astype(w2.dtype))


class NpuMoe(nn.Cell):
    """y only, like the twin's core (the plan outputs stay internal)."""

    def __init__(self, host: NpuHostState, group: str):
        super().__init__()
        self.function = NpuMoeFunction(host, group)

    def construct(self, x, topk_ids, topk_weights, w1, w2):
        return self.function(x, topk_ids, topk_weights, w1, w2)[0]
