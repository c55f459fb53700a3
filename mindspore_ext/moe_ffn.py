"""hpmoe.mindspore.HyperParallelMoEFFN: the MoE-FFN forward and backward as one nn.Cell (PyNative and GRAPH).

construct(x [T, h], topk_ids int32 [T, k], topk_weights [T, k]) -> y [T, h]; gradients reach x, topk_weights,
w1 and w2. On CPU it runs the CPU twin: two pyfunc host steps (count rows, agree on counts across the group
with an AllGather, plan) and two aot kernels (forward, backward as the inner cell's bprop) that call the twin's
C ABI. On Ascend (op package installed, see ascend.py) it runs the aclnn op of op_kernel/ascend instead
(npu_core.py, npu_host.py); `tokens`, the T of every call, is then required when the cell is built.
"""
from __future__ import annotations

import numpy as np

import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops
from mindspore.common import dtype as mstype
from mindspore.common.initializer import Normal, initializer

from hpmoe.errors import InputError

from . import group as ep_group
from . import ascend
from .host_state import HostState
from .kernel_library import aot_name
from .npu_core import NpuMoe
from .npu_host import NpuHostState

DTYPES = {mstype.float32: "fp32", mstype.float16: "fp16", mstype.bfloat16: "bf16"}
FLOAT_TYPES = (mstype.float32, mstype.float16, mstype.bfloat16)


def check_inputs(x_shape, x_dtype, ids_shape, ids_dtype, w_shape, w_dtype, hidden, topk, dtype):
    """Shapes and dtypes, before anything runs (values: in the plan step). Raises ValueError (one line; GRAPH mode raises only builtin
    exception types)."""
    if len(x_shape) != 2 or x_shape[1] != hidden:
        raise ValueError(f"x must have shape [T, {hidden}], got {list(x_shape)}")
    if x_dtype != dtype:
        raise ValueError(f"x must have dtype {dtype} (the cell's dtype), got {x_dtype}")
    if list(ids_shape) != [x_shape[0], topk]:
        raise ValueError(f"topk_ids must have shape [{x_shape[0]}, {topk}], got {list(ids_shape)}")
    if ids_dtype != mstype.int32:
        raise ValueError(f"topk_ids must have dtype Int32, got {ids_dtype}")
    if list(w_shape) != [x_shape[0], topk]:
        raise ValueError(f"topk_weights must have shape [{x_shape[0]}, {topk}], got {list(w_shape)}")
    if w_dtype not in FLOAT_TYPES:
        raise ValueError(f"topk_weights must have a float dtype, got {w_dtype}")


def _drain_pending_errors(tries: int = 4) -> None:
    """MindSpore keeps a failed pyfunc's exception pending and raises it again at a later synchronisation;
    clear it so that it cannot surface in the caller's next, valid call."""
    for _ in range(tries):
        try:
            ms.runtime.synchronize()
            return
        except Exception:  # noqa: BLE001 - the stale copy of an error already raised to the caller
            continue


class _MoeFunction(nn.Cell):
    """The differentiable core: its bprop is the hpmoe backward kernel (MindSpore never differentiates the
    host steps or the forward kernel)."""

    def __init__(self, state: HostState, group: str | None):
        super().__init__()
        self.ep = state.ep
        self.context = Tensor(np.array([state.context_id], np.int32))
        self.count_rows = ops.Custom(state.count_rows, out_shape=lambda ids: [state.ep],
                                     out_dtype=lambda ids: mstype.int32, func_type="pyfunc")
        self.plan = ops.Custom(state.plan, out_shape=lambda ids, rows: [1],
                               out_dtype=lambda ids, rows: mstype.int32, func_type="pyfunc")
        if self.ep > 1:
            self.all_gather = ops.AllGather(group)
        self.forward_kernel = ops.Custom(aot_name("hpmoe_ms_forward"), out_shape=lambda c, x, w, w1, w2: x,
                                         out_dtype=lambda c, x, w, w1, w2: x, func_type="aot")
        # Every output shape follows from an input's (PyNative caches inferred shapes per function name and
        # input signature, so a shape that did not would collide between cells).
        self.backward_kernel = ops.Custom(aot_name("hpmoe_ms_backward"),
                                          out_shape=lambda c, y, dy, w, w1, w2: (y, w, w1, w2),
                                          out_dtype=lambda c, y, dy, w, w1, w2: (y, w, w1, w2), func_type="aot")

    def construct(self, x, topk_ids, topk_weights, w1, w2):
        rows = self.count_rows(topk_ids)
        if self.ep > 1:
            rows = self.all_gather(rows)  # the group agrees on the counts before any data moves
        context = self.plan(topk_ids, rows)
        return self.forward_kernel(context, x, topk_weights, w1, w2)

    def bprop(self, x, topk_ids, topk_weights, w1, w2, out, dout):
        dx, dweights, dw1, dw2 = self.backward_kernel(self.context, out, dout, topk_weights, w1, w2)
        return dx, ops.zeros_like(topk_ids), dweights, dw1, dw2


def make_core(hidden_size, intermediate_size, num_local_experts, topk, dtype, capacity_factor, ssc_dir, group,
              tokens=None):
    """(host state, differentiable core cell taking (x, topk_ids, topk_weights, w1, w2)); checks the group.
    On Ascend: the aclnn op (npu_core) where its package is installed, else a one-line refusal."""
    npu = ascend.on_ascend_device()
    if npu:
        ascend.require_ascend_op()
    group, ep, rank = ep_group.resolve_group(group)
    if topk > ep * num_local_experts:
        raise InputError(f"topk={topk} is larger than the number of experts ep*num_local_experts="
                         f"{ep * num_local_experts}")
    if npu:
        if group is None:  # the op reaches its windows through an HCCL communicator, even for one rank
            raise InputError("hpmoe.mindspore: on Ascend the cell needs MindSpore's collectives (HCCL) "
                             "initialised, even for one rank: launch with msrun and call "
                             "mindspore.communication.init() first")
        host = NpuHostState(hidden_size, intermediate_size, num_local_experts, topk, DTYPES[dtype],
                            capacity_factor, ssc_dir, tokens, ep, rank, group)
        return host, NpuMoe(host, group)
    state = HostState(hidden_size, intermediate_size, num_local_experts, topk, DTYPES[dtype], capacity_factor,
                      ssc_dir, ep, rank, ep_group.group_key(group, ep))
    return state, _MoeFunction(state, group)


class HyperParallelMoEFFN(nn.Cell):
    def __init__(self, hidden_size, intermediate_size, num_local_experts, topk, *, dtype=mstype.float32,
                 capacity_factor=None, ssc_dir=None, group=None, tokens=None):
        super().__init__()
        if dtype not in DTYPES:
            raise InputError(f"dtype must be one of float32, float16, bfloat16, got {dtype}")
        for name, v in (("hidden_size", hidden_size), ("intermediate_size", intermediate_size),
                        ("num_local_experts", num_local_experts), ("topk", topk)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise InputError(f"{name} must be a positive integer, got {v!r}")
        self.state, self.moe = make_core(hidden_size, intermediate_size, num_local_experts, topk, dtype,
                                         capacity_factor, ssc_dir, group, tokens)
        ep, rank = self.state.ep, self.state.rank
        self.hidden_size, self.intermediate_size, self.topk = hidden_size, intermediate_size, topk
        self.num_local_experts, self.ep, self.rank, self.dtype = num_local_experts, ep, rank, dtype
        h, inter, e = hidden_size, intermediate_size, num_local_experts
        self.w1 = Parameter(initializer(Normal(h ** -0.5), [e, h, 2 * inter], dtype), name="w1")
        self.w2 = Parameter(initializer(Normal(inter ** -0.5), [e, inter, h], dtype), name="w2")

    def __call__(self, *args, **kwargs):
        if ms.get_context("mode") != ms.PYNATIVE_MODE:
            return super().__call__(*args, **kwargs)  # GRAPH mode stops at the failing pyfunc host step
        # PyNative runs ops asynchronously: an error raised inside a pyfunc host step (bad ids, a pinned bucket
        # that overflows, a mismatched ssc_dir) can surface one call late, after the aot kernel already failed
        # with a bare error code. Wait for this call's ops and raise the host step's own one-line reason.
        self.state.failure = None
        error = None
        try:
            out = super().__call__(*args, **kwargs)
            ms.runtime.synchronize()
        except Exception as raised:  # noqa: BLE001 - re-raised below, as the host step's reason when it has one
            error = raised
        if error is None and self.state.failure is None:
            return out
        _drain_pending_errors()
        raise (self.state.failure or error) from None

    def construct(self, x, topk_ids, topk_weights):
        check_inputs(x.shape, x.dtype, topk_ids.shape, topk_ids.dtype, topk_weights.shape, topk_weights.dtype,
                     self.hidden_size, self.topk, self.dtype)
        return self.moe(x, topk_ids, topk_weights, self.w1, self.w2)

