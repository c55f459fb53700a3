"""The MindSpore route to the NPU: HyperParallelMoEFFN calls the AscendC op `HyperParallelMoe` (CANN generates
aclnnHyperParallelMoeGetWorkspaceSize / aclnnHyperParallelMoe for it) through ops.Custom with func_type="aot",
the mechanism MindSpore 2.10 documents for Ascend C operators installed from an op package: `func` is the
operator name, `out_shape` / `out_dtype` are the Python infer, and the attributes are declared with
CustomRegOp(...).attr(...) in `reg_info` (ops.Custom docstring of mindspore 2.10.0, "b) Ascend platform";
https://www.mindspore.cn/tutorials/en/r2.10.0/custom_program/operation/op_custom_ascendc.html ;
CustomRegOp.attr: https://mindspore.cn/docs/zh-CN/master/api_python/ops/mindspore.ops.CustomRegOp.html).

Nothing here has run on an NPU (none exists where this was written). What is tested without one: the op's
inputs and attributes in order (`aclnn_inputs`, `AclnnAttrs`) drive the aclnn two-phase API of the CPU stub
runner (tests/ascend/test_aclnn_two_phase.py), and the Custom op is built with this name, these inputs and
these attributes (tests/mindspore/test_ms_ascend_route.py, with the device check mocked); the cell's forward
and backward run through the route with the op replaced by a stand-in calling that API
(tests/mindspore/test_ms_npu_route.py). The cell's side of the route: npu_core.py, npu_host.py."""
from __future__ import annotations

import secrets
from dataclasses import astuple, dataclass, fields

from . import ascend

OP_NAME = "HyperParallelMoe"  # aclnn<OP_NAME> in the op package (op_host/ascend/package)
INPUTS = ("x", "w1", "w2", "topk_ids", "topk_weights", "dy", "send_rows", "send_counts", "token_rows", "ssc",
          "epoch")
OUTPUTS = ("y", "dx", "dw1", "dw2", "dtopk_weights")


@dataclass(frozen=True)
class AclnnAttrs:
    """The op's attributes, in the OpDef's order (op_host/ascend/package/op_host/hyper_parallel_moe.cpp)."""
    group: str          # the EP communication group: the op's MC2 HcclGroup, whose windows hold the buffers
    rank: int
    direction: int      # 0 forward, 1 backward
    counters_fwd: int   # the largest event count of any rank's forward SSC
    counters_bwd: int
    window_nonce: int   # agreed by the group, fresh for every set-up of its windows (kernel window_setup.h)
    timeout_ms: int = 30000

    def values(self) -> tuple:
        return astuple(self)


def npu_route() -> bool:
    """The route is explicit: the aclnn op on an Ascend device where its package is installed; the CPU twin
    everywhere else."""
    return ascend.on_ascend_device() and ascend.ascend_op_installed()


def draw_window_nonce() -> int:
    """A non-zero int63 for rank 0 to draw and the group to share (an AllGather of it) before the first call."""
    return secrets.randbits(62) + 1


def aclnn_inputs(x, w1, w2, topk_ids, topk_weights, dy, send_rows, send_counts, token_rows, ssc, epoch) -> tuple:
    """The op's inputs in its order; dy is None in forward (an absent optional input)."""
    return (x, w1, w2, topk_ids, topk_weights, dy, send_rows, send_counts, token_rows, ssc, epoch)


def reg_info(attrs: AclnnAttrs):
    """CustomRegOp info: the 11 inputs (dy optional), 5 outputs and the attributes with their values."""
    from mindspore.ops import CustomRegOp

    reg = CustomRegOp(OP_NAME)
    for i, name in enumerate(INPUTS):
        reg = reg.input(i, name, "optional" if name == "dy" else "required")
    for i, name in enumerate(OUTPUTS):
        reg = reg.output(i, name, "required")
    for f in fields(attrs):
        value = getattr(attrs, f.name)
        reg = reg.attr(f.name, "required", "str" if isinstance(value, str) else "int", value=value)
    return reg.target("Ascend").get_op_info()


def build_custom_op(attrs: AclnnAttrs, bprop=None):
    """ops.Custom calling aclnnHyperParallelMoe. Output shapes: y, dx like x; dw1, dw2 like w1, w2;
    dtopk_weights like topk_weights (InferShape of the op). Dtypes: y, dx like x; the rest float32."""
    from mindspore import ops
    from mindspore.common import dtype as mstype

    def out_shape(x, w1, w2, ids, weights, *rest):
        return (x, x, w1, w2, weights)

    def out_dtype(x, w1, w2, ids, weights, *rest):
        return (x, x, mstype.float32, mstype.float32, mstype.float32)

    return ops.Custom(OP_NAME, out_shape=out_shape, out_dtype=out_dtype, func_type="aot", bprop=bprop,
                      reg_info=reg_info(attrs))
