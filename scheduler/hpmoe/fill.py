"""FillConfig: turn each operator's tiles into Tasks with explicit tensor regions.

Row-tiled ops partition the ep*C receive-row space into op.task_num equal tiles; with the normal split that is
one tile per (source slot, chunk). A fallback (task_num 1) gives one tile over all rows, which the handlers
support because they intersect any row range with the valid rows of each slot (docs/design.md).
"""
from __future__ import annotations

from typing import Callable

from .config import MoeConfig
from .errors import ScheduleError
from .act_split import act_blocks, act_n_block, fused_blocks
from .gmm_split import col_blocks
from .wgrad_split import wgrad_col_blocks
from .odg import OperatorGraph, OperatorNode, TensorSpec
from .ssc_format import REF_GATHER, REF_REMOTE, REF_ROWS_DYNAMIC, QueueType, Slot, TaskType
from .tasks import NO_PEER, Ref, Task

RECV_SPACE = {Slot.RECV_X, Slot.H, Slot.A, Slot.Y_EXPERT, Slot.RET_Y, Slot.RECV_DY, Slot.DA, Slot.DH,
              Slot.DX_EXPERT, Slot.RET_DX}


def whole(t: TensorSpec, rank: int, flags: int = 0) -> Ref:
    return Ref(t.slot, rank, 0, t.rows, 0, t.cols, flags)


def rows_of(t: TensorSpec, rank: int, row0: int, rows: int, flags: int = 0) -> Ref:
    return Ref(t.slot, rank, row0, rows, 0, t.cols, flags)


def remote(rank: int, dst: int) -> int:
    return REF_REMOTE if dst != rank else 0


class Filler:
    """Builds the tasks of one operator on one rank."""

    def __init__(self, cfg: MoeConfig, op: OperatorNode, rank: int, tiling: int,
                 writes_into: frozenset[int] | None = None):
        self.cfg, self.op, self.rank, self.tiling = cfg, op, rank, tiling
        self.writes_into = writes_into  # keep only tasks writing into these ranks (None: keep all)
        self.tasks: list[Task] = []

    def add(self, task_type: TaskType, queue: QueueType, index: int, split_num: int, split_value: int,
            inputs: list[Ref], outputs: list[Ref], *, phase: int = 0, peer: int = NO_PEER,
            chunk: int = -1, expert: int = 0) -> None:
        if self.writes_into is not None and not any(ref.rank in self.writes_into for ref in outputs):
            return
        self.tasks.append(Task(self.rank, self.op.op_id, self.op.name, task_type, queue, index, split_num,
                               split_value, phase, peer, index if chunk < 0 else chunk, expert,
                               inputs, outputs, self.tiling))

    def wants(self, dst: int) -> bool:
        """Whether a task writing into `dst` is kept (lets put loops skip building dropped tasks)."""
        return self.writes_into is None or dst in self.writes_into

    # ---- shared shapes ------------------------------------------------------------------------
    def row_tiles(self) -> list[tuple[int, int, int, int]]:
        """(row0, rows, peer, chunk) for each of op.task_num tiles of the receive-row space."""
        n, R, C = self.op.task_num, self.cfg.recv_rows, self.cfg.recv_rows_per_src
        if R % n:
            raise ScheduleError(f"{self.op.name}: {n} tiles do not divide {R} receive rows")
        rows = R // n
        tiles = []
        for i in range(n):
            row0 = i * rows
            same_slot = row0 // C == (row0 + rows - 1) // C
            peer = row0 // C if same_slot else NO_PEER
            chunk = (row0 % C) // rows if same_slot else i
            tiles.append((row0, rows, peer, chunk))
        return tiles

    def put_chunks(self) -> tuple[int, int]:
        """(chunks per destination, rows per chunk) of a put op. A put has one destination, so an op that
        fell back to one task (Algorithm 1, line 12) still issues one whole-slot put per destination."""
        n, ep, C = self.op.task_num, self.cfg.ep, self.cfg.recv_rows_per_src
        if n < ep:
            return 1, C
        if n % ep or C % (n // ep):
            raise ScheduleError(f"{self.op.name}: {n} put tasks cannot split {ep} destination slots of {C} rows")
        return n // ep, C // (n // ep)

    def token_tiles(self) -> list[tuple[int, int]]:
        T, tt = self.cfg.tokens, self.cfg.token_tile
        return [(t0, min(tt, T - t0)) for t0 in range(0, T, tt)]


def _entry_signals(f: Filler, peer_ready: TensorSpec) -> None:
    """Each rank tells every peer (itself included) that it entered this invocation."""
    for p in range(f.cfg.ep):
        out = Ref(peer_ready.slot, p, 0, 1, f.rank, 1, remote(f.rank, p))
        f.add(TaskType.ENTRY_SIGNAL, QueueType.VTQ, p, f.cfg.ep, 1, [], [out], phase=0, peer=p, chunk=0)


def fill_dispatch(f: Filler) -> None:
    x, send_rows, send_counts = f.op.inputs
    peer_ready, recv_counts, recv_x = f.op.outputs
    _entry_signals(f, peer_ready)
    ready = whole(peer_ready, f.rank)
    for d in range(f.cfg.ep):
        f.add(TaskType.COUNT_PUT, QueueType.VTQ, d, f.cfg.ep, 1,
              [rows_of(send_counts, f.rank, d, 1), ready],
              [rows_of(recv_counts, d, f.rank, 1, remote(f.rank, d))], phase=1, peer=d, chunk=0)
    _chunk_puts(f, TaskType.DISPATCH_PUT, [whole(x, f.rank, REF_GATHER)], send_rows, recv_x, ready)


def fill_bwd_dispatch(f: Filler) -> None:
    dy, topk_weights, send_rows = f.op.inputs
    peer_ready, recv_dy = f.op.outputs
    _entry_signals(f, peer_ready)
    ready = whole(peer_ready, f.rank)
    _chunk_puts(f, TaskType.BWD_DISPATCH_PUT,
                [whole(dy, f.rank, REF_GATHER), whole(topk_weights, f.rank, REF_GATHER)], send_rows, recv_dy, ready)


def _chunk_puts(f: Filler, task_type: TaskType, gathered: list[Ref], send_rows: TensorSpec,
                dst_buf: TensorSpec, ready: Ref) -> None:
    per_dst, rows = f.put_chunks()
    C = f.cfg.recv_rows_per_src
    for d in filter(f.wants, range(f.cfg.ep)):
        for c in range(per_dst):
            plan = Ref(send_rows.slot, f.rank, d, 1, c * rows, rows)
            out = rows_of(dst_buf, d, f.rank * C + c * rows, rows, REF_ROWS_DYNAMIC | remote(f.rank, d))
            f.add(task_type, QueueType.VTQ, d * per_dst + c, f.cfg.ep * per_dst, rows, gathered + [plan, ready], [out],
                  phase=2, peer=d, chunk=c)


GMM_TYPES = (TaskType.GMM, TaskType.GMM_TRANS_B)
ACT_TYPES = (TaskType.SWIGLU, TaskType.SWIGLU_GRAD)
FUSED_TYPES = (TaskType.GMM_SWIGLU, TaskType.GMM_SWIGLU_GRAD)


def _row_ref(f: Filler, t: TensorSpec, row0: int, rows: int) -> Ref:
    return rows_of(t, f.rank, row0, rows, REF_ROWS_DYNAMIC) if t.slot in RECV_SPACE else whole(t, f.rank)


def fill_row_tiled(f: Filler) -> None:
    """GMM, SwiGLU and their gradients: tiles of the receive-row space, weights and counts read whole. A GMM
    row tile is one task per column block of its output (gmm_split.py), blocks left to right; a split SwiGLU
    or SwiGLU gradient goes through fill_act_blocks."""
    if f.op.task_type in ACT_TYPES and act_n_block(f.cfg):
        fill_act_blocks(f)
        return
    (out,) = f.op.outputs
    blocks = col_blocks(f.cfg, out.cols, f.op.inputs[0].cols) if f.op.task_type in GMM_TYPES else [(0, out.cols)]
    for i, (row0, rows, peer, chunk) in enumerate(f.row_tiles()):
        inputs = [_row_ref(f, t, row0, rows) for t in f.op.inputs]
        for j, (c0, cols) in enumerate(blocks):
            output = Ref(out.slot, f.rank, row0, rows, c0, cols, REF_ROWS_DYNAMIC)
            f.add(f.op.task_type, f.op.queue, i * len(blocks) + j, f.op.task_num * len(blocks), rows, inputs,
                  [output], peer=peer, chunk=chunk)


def fill_act_blocks(f: Filler) -> None:
    """Activation tasks of A's columns [c0, c0 + m) (act_split.py). Every H-wide region ([*, 2I]: H, dH)
    becomes two, gate [c0, c0 + m) then up [I + c0, I + c0 + m); I-wide ones (A, dA) the block itself.
    SwiGLU: (H gate, H up, counts) -> A; gradient: (dA, H gate, H up, counts) -> (dH gate, dH up)."""
    inter = f.cfg.inter
    blocks = act_blocks(f.cfg)

    def regions(t: TensorSpec, row0: int, rows: int, c0: int, cols: int) -> list[Ref]:
        if t.slot not in RECV_SPACE:
            return [whole(t, f.rank)]
        offsets = (c0, inter + c0) if t.cols == 2 * inter else (c0,)
        return [Ref(t.slot, f.rank, row0, rows, o, cols, REF_ROWS_DYNAMIC) for o in offsets]

    for i, (row0, rows, peer, chunk) in enumerate(f.row_tiles()):
        for j, (c0, cols) in enumerate(blocks):
            inputs = [r for t in f.op.inputs for r in regions(t, row0, rows, c0, cols)]
            outputs = [r for t in f.op.outputs for r in regions(t, row0, rows, c0, cols)]
            f.add(f.op.task_type, f.op.queue, i * len(blocks) + j, f.op.task_num * len(blocks), rows, inputs,
                  outputs, peer=peer, chunk=chunk)


def fill_gmm_swiglu(f: Filler) -> None:
    """Fused tasks (cfg.fuse_swiglu) of A's column blocks [c0, c0 + m) (act_split.fused_blocks). GMM1 with
    SwiGLU: (recv_x rows, W1, counts) -> (H's interleaved columns [2 c0, 2 c0 + 2 m), A [c0, c0 + m)). The
    activation gradient: (recv_dy rows, W2, H's interleaved columns, counts) -> (dH gate [c0, +m), up
    [I + c0, +m)); dA stays in the tile."""
    inter, fwd = f.cfg.inter, f.op.task_type == TaskType.GMM_SWIGLU
    blocks = fused_blocks(f.cfg, f.op.task_type)
    for i, (row0, rows, peer, chunk) in enumerate(f.row_tiles()):
        for j, (c0, cols) in enumerate(blocks):
            h = Ref(Slot.H, f.rank, row0, rows, 2 * c0, 2 * cols, REF_ROWS_DYNAMIC)
            if fwd:
                x, w1, counts = f.op.inputs
                inputs = [_row_ref(f, x, row0, rows), whole(w1, f.rank), whole(counts, f.rank)]
                outputs = [h, Ref(Slot.A, f.rank, row0, rows, c0, cols, REF_ROWS_DYNAMIC)]
            else:
                dy, w2, _, counts = f.op.inputs
                inputs = [_row_ref(f, dy, row0, rows), whole(w2, f.rank), h, whole(counts, f.rank)]
                outputs = [Ref(Slot.DH, f.rank, row0, rows, o, cols, REF_ROWS_DYNAMIC) for o in (c0, inter + c0)]
            f.add(f.op.task_type, f.op.queue, i * len(blocks) + j, f.op.task_num * len(blocks), rows, inputs,
                  outputs, peer=peer, chunk=chunk)


def fill_weight_grad(f: Filler) -> None:
    """dW[e][block, cols] = X_e[:, block]^T dY_e[:, cols]: X is read on the row block's columns, dY on the column
    block (the whole width unless wgrad_split.py splits it), the reduction never split. Tasks in (expert, row
    block, column block) order; the claim pool takes them per expert column block by column block
    (worker_queues._pool_units), so the units reading one block of dY run together."""
    x_like, dy_like, counts, *wait_all = f.op.inputs  # fused dW1: + the whole of dH (graphs.py)
    (dw,) = f.op.outputs
    per_expert_rows = dw.shape[1]
    wg = f.cfg.wgrad_tile
    blocks = per_expert_rows // wg
    cols = wgrad_col_blocks(f.cfg, dw.cols)
    if f.op.task_num != f.cfg.experts_per_rank * blocks * len(cols):
        raise ScheduleError(f"{f.op.name}: {f.op.task_num} tasks do not match {f.cfg.experts_per_rank} experts x "
                            f"{blocks} row blocks x {len(cols)} column blocks")
    for i in range(f.op.task_num):
        eb, c = divmod(i, len(cols))
        e, b = divmod(eb, blocks)
        c0, n = cols[c]
        x_ref = Ref(x_like.slot, f.rank, 0, x_like.rows, b * wg, wg, REF_ROWS_DYNAMIC)
        dy_ref = Ref(dy_like.slot, f.rank, 0, dy_like.rows, c0, n, REF_ROWS_DYNAMIC)
        out = Ref(dw.slot, f.rank, e * per_expert_rows + b * wg, wg, c0, n)
        f.add(f.op.task_type, QueueType.CTQ, i, f.op.task_num, wg,
              [x_ref, dy_ref, whole(counts, f.rank)] + [whole(t, f.rank) for t in wait_all], [out], expert=e, chunk=b)


def _combine(f: Filler, reduce_type: TaskType, reduce_inputs: list[TensorSpec]) -> None:
    """Puts of each row tile back to its source slot, then the source-side top-k reduce over token tiles.
    A put reads its rows and recv_counts (how many of them are valid)."""
    expert_out, counts = f.op.inputs[0], f.op.inputs[1]
    ret, out = f.op.outputs
    C = f.cfg.recv_rows_per_src
    per_dst, rows = f.put_chunks()
    for dst in filter(f.wants, range(f.cfg.ep)):
        for c in range(per_dst):
            row0 = dst * C + c * rows
            local = rows_of(ret, dst, f.rank * C + c * rows, rows, REF_ROWS_DYNAMIC | remote(f.rank, dst))
            f.add(TaskType.COMBINE_PUT, QueueType.VTQ, dst * per_dst + c, f.cfg.ep * per_dst, rows,
                  [rows_of(expert_out, f.rank, row0, rows, REF_ROWS_DYNAMIC), whole(counts, f.rank)], [local],
                  phase=0, peer=dst, chunk=c)
    tiles = f.token_tiles() if f.wants(f.rank) else []
    for i, (t0, tt) in enumerate(tiles):
        inputs = [whole(ret, f.rank)] + [rows_of(t, f.rank, t0, tt) for t in reduce_inputs]
        f.add(reduce_type, QueueType.VTQ, i, len(tiles), f.cfg.token_tile, inputs, [rows_of(out, f.rank, t0, tt)],
              phase=1)


def fill_combine(f: Filler) -> None:
    _combine(f, TaskType.COMBINE_REDUCE, [f.op.inputs[2], f.op.inputs[3]])


def fill_bwd_combine(f: Filler) -> None:
    _combine(f, TaskType.BWD_COMBINE_REDUCE, [f.op.inputs[2]])


def fill_topk_weight_grad(f: Filler) -> None:
    dy, ret_y, token_rows = f.op.inputs
    (dtw,) = f.op.outputs
    tiles = f.token_tiles()
    if f.op.task_num != len(tiles):
        raise ScheduleError(f"{f.op.name}: {f.op.task_num} tasks for {len(tiles)} token tiles")
    for i, (t0, tt) in enumerate(tiles):
        f.add(TaskType.TOPK_WEIGHT_GRAD, QueueType.VTQ, i, len(tiles), f.cfg.token_tile,
              [rows_of(dy, f.rank, t0, tt), whole(ret_y, f.rank), rows_of(token_rows, f.rank, t0, tt)],
              [rows_of(dtw, f.rank, t0, tt)])


FILL_CONFIG: dict[str, Callable[[Filler], None]] = {
    "Dispatch": fill_dispatch, "GMM1": fill_row_tiled, "SwiGLU": fill_row_tiled, "GMM2": fill_row_tiled,
    "Combine": fill_combine,
    "BwdDispatch": fill_bwd_dispatch, "GMM_act_grad": fill_row_tiled, "GMM_w2_grad": fill_weight_grad,
    "SwiGLU_grad": fill_row_tiled, "GMM_gate_grad": fill_row_tiled, "GMM_w1_grad": fill_weight_grad,
    "BwdCombine": fill_bwd_combine, "TopkWeightGrad": fill_topk_weight_grad,
    "GMM1_SwiGLU": fill_gmm_swiglu, "GMM_act_grad_SwiGLU": fill_gmm_swiglu,
}


def fill_rank(graph: OperatorGraph, cfg: MoeConfig, rank: int,
              writes_into: frozenset[int] | None = None) -> list[Task]:
    """The tasks of one rank, operators in graph order (tiling position = op_id); with `writes_into`, only
    those writing into the given ranks (the producers another rank's events need)."""
    tasks: list[Task] = []
    for op in graph.nodes:
        if writes_into is not None and not any(t.symmetric for t in op.outputs):
            continue  # only ops with symmetric outputs can write into another rank
        filler = Filler(cfg, op, rank, tiling=op.op_id, writes_into=writes_into)
        FILL_CONFIG[op.name](filler)
        tasks.extend(filler.tasks)
    return tasks

