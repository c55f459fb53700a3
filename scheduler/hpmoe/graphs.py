"""The forward (5 nodes) and backward (7 nodes + router-weight gradient) MoE-FFN graphs of one EP rank; with
cfg.fuse_swiglu, SwiGLU runs in GMM1's tiles and its gradient in the activation gradient's (4 and 6 + 1 nodes).

Row space: every per-rank expert-side buffer (recv_x, h, a, y_expert, recv_dy, da, dh, dx_expert) and every
return buffer (ret_y, ret_dx) has ep * C rows: slot s (rows s*C .. s*C+C) holds the rows exchanged with
rank s, sorted by local expert. See docs/design.md.
"""
from __future__ import annotations

from .config import MoeConfig
from .odg import OperatorGraph, OperatorNode, SplitSpec, TensorSpec
from .ssc_format import DType, QueueType, Role, Slot, TaskType
from .wgrad_split import wgrad_col_blocks


def tensor_specs(cfg: MoeConfig) -> dict[Slot, TensorSpec]:
    """Fresh TensorSpecs (fresh split labels) for every slot."""
    T, h, inter, E, k, ep = cfg.tokens, cfg.hidden, cfg.inter, cfg.experts_per_rank, cfg.topk, cfg.ep
    R, C, act = cfg.recv_rows, cfg.recv_rows_per_src, cfg.dtype_enum
    i32, f32 = DType.INT32, DType.FP32
    # Each expert's weight matrix and its gradient: [in, out] (x W), or nn.Linear's [out, in] when transposed.
    w1 = (E, 2 * inter, h) if cfg.weights_transposed else (E, h, 2 * inter)
    w2 = (E, h, inter) if cfg.weights_transposed else (E, inter, h)
    spec = {
        Slot.X: ((T, h), act, Role.INPUT, False),
        Slot.TOPK_IDS: ((T, k), i32, Role.ROUTING, False),
        Slot.TOPK_WEIGHTS: ((T, k), f32, Role.ROUTING, False),
        Slot.W1: (w1, act, Role.WEIGHT, False),
        Slot.W2: (w2, act, Role.WEIGHT, False),
        Slot.SEND_ROWS: ((ep, C), i32, Role.ROUTING, False),
        Slot.SEND_COUNTS: ((ep, E), i32, Role.ROUTING, False),
        Slot.RECV_COUNTS: ((ep, E), i32, Role.ROUTING, True),
        Slot.PEER_READY: ((1, ep), i32, Role.ROUTING, True),
        Slot.TOKEN_ROWS: ((T, k), i32, Role.ROUTING, False),
        Slot.RECV_X: ((R, h), act, Role.SAVED, True),
        Slot.H: ((R, 2 * inter), act, Role.SAVED, False),
        Slot.A: ((R, inter), act, Role.SAVED, False),
        Slot.Y_EXPERT: ((R, h), act, Role.WORKSPACE, False),
        Slot.RET_Y: ((R, h), act, Role.SAVED, True),
        Slot.Y: ((T, h), act, Role.OUTPUT, False),
        Slot.DY: ((T, h), act, Role.INPUT, False),
        Slot.RECV_DY: ((R, h), act, Role.WORKSPACE, True),
        Slot.DA: ((R, inter), act, Role.WORKSPACE, False),
        Slot.DH: ((R, 2 * inter), act, Role.WORKSPACE, False),
        Slot.DX_EXPERT: ((R, h), act, Role.WORKSPACE, False),
        Slot.RET_DX: ((R, h), act, Role.WORKSPACE, True),
        Slot.DX: ((T, h), act, Role.OUTPUT, False),
        Slot.DW1: (w1, f32, Role.OUTPUT, False),
        Slot.DW2: (w2, f32, Role.OUTPUT, False),
        Slot.DTOPK_WEIGHTS: ((T, k), f32, Role.OUTPUT, False),
    }
    return {slot: TensorSpec(slot, shape, dtype, role, sym) for slot, (shape, dtype, role, sym) in spec.items()}


def _row_tiles(cfg: MoeConfig) -> int:
    return cfg.row_tiles


def _row_split(*output_dims: int) -> SplitSpec:
    """Inherit the row partition of input 0 and pass it on along dim 0 (or as given)."""
    return SplitSpec(split_inputs=((0, 0),), split_output_dims=output_dims or (0,), task_num_fn=_row_tiles)


def build_forward_graph(cfg: MoeConfig) -> OperatorGraph:
    t = tensor_specs(cfg)
    if cfg.fuse_swiglu:  # H is saved for the backward, in the interleaved column order (ssc_format)
        first = [OperatorNode("GMM1_SwiGLU", TaskType.GMM_SWIGLU, QueueType.CTQ,
                              [t[Slot.RECV_X], t[Slot.W1], t[Slot.RECV_COUNTS]], [t[Slot.H], t[Slot.A]],
                              _row_split(0, 0))]
    else:
        first = [OperatorNode("GMM1", TaskType.GMM, QueueType.CTQ,
                              [t[Slot.RECV_X], t[Slot.W1], t[Slot.RECV_COUNTS]], [t[Slot.H]], _row_split()),
                 OperatorNode("SwiGLU", TaskType.SWIGLU, QueueType.VTQ,
                              [t[Slot.H], t[Slot.RECV_COUNTS]], [t[Slot.A]], _row_split())]
    nodes = [
        # Origin of the row partition: one put per (destination rank, chunk of its receive slot).
        OperatorNode("Dispatch", TaskType.DISPATCH_PUT, QueueType.VTQ,
                     [t[Slot.X], t[Slot.SEND_ROWS], t[Slot.SEND_COUNTS]],
                     [t[Slot.PEER_READY], t[Slot.RECV_COUNTS], t[Slot.RECV_X]],
                     SplitSpec(None, (-1, -1, 0), _row_tiles)),
        *first,
        OperatorNode("GMM2", TaskType.GMM, QueueType.CTQ,
                     [t[Slot.A], t[Slot.W2], t[Slot.RECV_COUNTS]], [t[Slot.Y_EXPERT]], _row_split()),
        # Metadata inputs (weights of the top-k sum, row maps) are ignored by the split check.
        OperatorNode("Combine", TaskType.COMBINE_PUT, QueueType.VTQ,
                     [t[Slot.Y_EXPERT], t[Slot.RECV_COUNTS], t[Slot.TOPK_WEIGHTS], t[Slot.TOKEN_ROWS]],
                     [t[Slot.RET_Y], t[Slot.Y]], _row_split(0, -1)),
    ]
    return OperatorGraph("forward", nodes)


def _weight_grad_tasks(cfg: MoeConfig, dw: TensorSpec) -> int:
    """Tasks of a weight-gradient op: experts x wgrad_tile-row blocks of dW[e] x its column blocks
    (wgrad_split.py; the whole width unless split), as fill_weight_grad makes them."""
    experts, rows, cols = dw.shape
    return experts * (rows // cfg.wgrad_tile) * len(wgrad_col_blocks(cfg, cols))


def build_backward_graph(cfg: MoeConfig) -> OperatorGraph:
    t = tensor_specs(cfg)
    # dW[e][block] = in0[:, block]^T in1 (fill_weight_grad). Transposed weights swap the operands, so each
    # tile holds rows of the [out, in] gradient: dW2t = dY^T A, dW1t = dH^T X (same products, same row order).
    if cfg.weights_transposed:
        w2_grad_in, w1_grad_in = [t[Slot.RECV_DY], t[Slot.A]], [t[Slot.DH], t[Slot.RECV_X]]
    else:
        w2_grad_in, w1_grad_in = [t[Slot.A], t[Slot.RECV_DY]], [t[Slot.RECV_X], t[Slot.DH]]
    if cfg.fuse_swiglu:
        # dA never leaves the tile. dW1's units also read the whole of dH (input 3, task_access.py): one wait on
        # every dH producer, so a fused task triggers two events, not one per dW1 column block it feeds.
        w1_wait = [t[Slot.DH]]
        act_grad = [OperatorNode("GMM_act_grad_SwiGLU", TaskType.GMM_SWIGLU_GRAD, QueueType.CTQ,
                                 [t[Slot.RECV_DY], t[Slot.W2], t[Slot.H], t[Slot.RECV_COUNTS]], [t[Slot.DH]],
                                 _row_split())]
        swiglu_grad = []
    else:
        w1_wait = []
        act_grad = [OperatorNode("GMM_act_grad", TaskType.GMM_TRANS_B, QueueType.CTQ,
                                 [t[Slot.RECV_DY], t[Slot.W2], t[Slot.RECV_COUNTS]], [t[Slot.DA]], _row_split())]
        swiglu_grad = [OperatorNode("SwiGLU_grad", TaskType.SWIGLU_GRAD, QueueType.VTQ,
                                    [t[Slot.DA], t[Slot.H], t[Slot.RECV_COUNTS]], [t[Slot.DH]], _row_split())]
    nodes = [
        OperatorNode("BwdDispatch", TaskType.BWD_DISPATCH_PUT, QueueType.VTQ,
                     [t[Slot.DY], t[Slot.TOPK_WEIGHTS], t[Slot.SEND_ROWS]],
                     [t[Slot.PEER_READY], t[Slot.RECV_DY]], SplitSpec(None, (-1, 0), _row_tiles)),
        *act_grad,
        # Weight gradients reduce over all rows of an expert: split only along expert x output-row blocks.
        OperatorNode("GMM_w2_grad", TaskType.GMM_WEIGHT_GRAD, QueueType.CTQ,
                     w2_grad_in + [t[Slot.RECV_COUNTS]], [t[Slot.DW2]],
                     SplitSpec(None, (0,), lambda c: _weight_grad_tasks(c, t[Slot.DW2]))),
        *swiglu_grad,
        OperatorNode("GMM_gate_grad", TaskType.GMM_TRANS_B, QueueType.CTQ,
                     [t[Slot.DH], t[Slot.W1], t[Slot.RECV_COUNTS]], [t[Slot.DX_EXPERT]], _row_split()),
        OperatorNode("GMM_w1_grad", TaskType.GMM_WEIGHT_GRAD, QueueType.CTQ,
                     w1_grad_in + [t[Slot.RECV_COUNTS]] + w1_wait, [t[Slot.DW1]],
                     SplitSpec(None, (0,), lambda c: _weight_grad_tasks(c, t[Slot.DW1]))),
        OperatorNode("BwdCombine", TaskType.BWD_COMBINE_REDUCE, QueueType.VTQ,
                     [t[Slot.DX_EXPERT], t[Slot.RECV_COUNTS], t[Slot.TOKEN_ROWS]], [t[Slot.RET_DX], t[Slot.DX]],
                     _row_split(0, -1)),
        # d topk_weights[t, j] = <Y[t, j], dy[t]>: local to the source rank, from the saved returned rows.
        OperatorNode("TopkWeightGrad", TaskType.TOPK_WEIGHT_GRAD, QueueType.VTQ,
                     [t[Slot.DY], t[Slot.RET_Y], t[Slot.TOKEN_ROWS]], [t[Slot.DTOPK_WEIGHTS]],
                     SplitSpec(None, (0,), lambda c: c.token_tiles)),
    ]
    return OperatorGraph("backward", nodes)


def build_graph(cfg: MoeConfig, direction: str) -> OperatorGraph:
    return build_forward_graph(cfg) if direction == "fwd" else build_backward_graph(cfg)
