"""Per-task work of an SSC group under a routing: compute time, bytes read (by L2 block), bytes written, puts.

Reads only SSC records (RankSchedule arrays) plus `counts[s, d, e]` (routing.py), so files read from disk
simulate exactly like freshly compiled ones. Row-space regions are intersected with the valid rows of each
receive slot (docs/design.md): an empty chunk moves 0 bytes, a partial tile costs proportionally, and a GMM
tile that straddles experts runs one GEMM per expert segment and reads each of those weight matrices.

L2 blocks are named (slot, row tile, first column, columns) on the device that holds them; columns -1 means
full width. Reads of tensors no task produces in this direction and of gathered rows are treated as uncached.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..compiler import RankSchedule
from ..errors import HpmoeError
from ..ssc_format import DTYPE_BYTES, NO_EVENT, NO_SLOT, DType, QueueType, Slot, TaskType
from .hw import Hardware

FULL = -1
RECV_SIDE = {Slot.RECV_X, Slot.H, Slot.A, Slot.Y_EXPERT, Slot.RECV_DY, Slot.DA, Slot.DH, Slot.DX_EXPERT}
RET_SIDE = {Slot.RET_Y, Slot.RET_DX}
PUT_TYPES = {TaskType.ENTRY_SIGNAL, TaskType.COUNT_PUT, TaskType.DISPATCH_PUT, TaskType.BWD_DISPATCH_PUT,
             TaskType.COMBINE_PUT}
ROW_TILED = {TaskType.GMM, TaskType.GMM_TRANS_B, TaskType.SWIGLU, TaskType.SWIGLU_GRAD, TaskType.GMM_SWIGLU,
             TaskType.GMM_SWIGLU_GRAD}
# Fused SwiGLU (GPU schedules): costed as the GMM; the epilogue's elementwise work rides on the cube's time.
GMM_LIKE = (TaskType.GMM, TaskType.GMM_TRANS_B, TaskType.GMM_SWIGLU, TaskType.GMM_SWIGLU_GRAD)


class SimInputError(HpmoeError):
    """The schedules given to the simulator are not one complete EP group of one direction."""


@dataclasses.dataclass
class Workload:
    """Everything the engine and the cost model need, indexed by global task id (ranks concatenated)."""
    ep: int
    direction: str
    rank: np.ndarray            # int32 [n]
    unit: np.ndarray            # 0 = AIC, 1 = AIV
    task_type: np.ndarray
    local: np.ndarray           # index inside its rank's task array
    compute_us: np.ndarray      # cube or vector time at full speed of one core
    flops: np.ndarray           # cube flops (padded rows excluded)
    vec_ops: np.ndarray
    valid_rows: np.ndarray      # rows the task really handles (routing-dependent)
    put_bytes: np.ndarray       # payload of a put (0 for an empty chunk); -1 if not a put
    put_dst: np.ndarray         # destination rank of a put, -1 if none
    uncached_bytes: np.ndarray  # reads that never hit L2 (inputs, gathers)
    reads: list                 # per task: list of (key, bytes, full_key or None)
    writes: list                # per task: list of (device, key, bytes)
    waits: np.ndarray           # int64 [n, 2] global event ids, -1 none
    triggers: np.ndarray        # int64 [n, 2]
    thresholds: np.ndarray      # int64 [n_events]
    event_rank: np.ndarray
    workers: list               # (rank, unit, worker index, int64 array of global task ids)
    base: np.ndarray            # first global id of each rank

    @property
    def num_tasks(self) -> int:
        return len(self.rank)

    def totals(self) -> dict[str, float]:
        """Work that no ordering can change: flops, vector ops, bytes put, rows handled."""
        puts = self.put_bytes[self.put_bytes > 0]
        return {"tasks": int(self.num_tasks), "flops": float(self.flops.sum()), "vec_ops": float(self.vec_ops.sum()),
                "put_bytes": float(puts.sum()), "valid_rows": int(self.valid_rows.sum())}


def cube_us(hw: Hardware, m: np.ndarray, n: np.ndarray | int, k: np.ndarray | int) -> np.ndarray:
    """Time of an m x n x k GEMM on one AIC: rows padded to the fractal, efficiency curve by shape."""
    m = np.asarray(m, dtype=np.float64)
    frac = hw.cube_fractal
    mp = np.ceil(m / frac) * frac
    mm = np.minimum(mp, hw.cube_block_m)
    nn = np.minimum(np.asarray(n, dtype=np.float64), hw.cube_block_n)
    k = np.asarray(k, dtype=np.float64)
    eff = (hw.cube_max_efficiency * mm / np.maximum(mm + hw.cube_half_m, 1e-9)
           * nn / (nn + hw.cube_half_n) * k / np.maximum(k + hw.cube_half_k, 1e-9))
    flops = 2.0 * mp * n * k
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(m > 0, flops / (hw.cube_flop_per_us * np.where(eff > 0, eff, 1.0)), 0.0)


class _RankView:
    """Per-rank helpers: tensor shapes and the valid rows of every receive slot under the routing."""

    def __init__(self, s: RankSchedule, counts: np.ndarray):
        cfg = s.cfg
        self.cfg, self.rank, self.C, self.tm = cfg, s.rank, cfg.recv_rows_per_src, cfg.tile_m
        self.cols, self.esize = {}, {}
        for t in s.tensors:
            dims = [int(d) for d in t["dims"][:int(t["ndim"])]]
            self.cols[int(t["slot"])] = dims[-1]
            self.esize[int(t["slot"])] = DTYPE_BYTES[DType(int(t["dtype"]))]
        self.recv_valid = counts[:, :, :].sum(axis=2).T          # [x, s]: rows rank x receives from s
        self.send_valid = counts.sum(axis=2)                     # [x, d]: rows rank x sends d
        pre = np.zeros(counts.shape[:2] + (counts.shape[2] + 1,), dtype=np.int64)
        pre[:, :, 1:] = np.cumsum(counts, axis=2)
        self.pre = pre                                           # [s, x, e] prefix of counts[s, x, :]

    def valid_per_slot(self, slot: int, region_rank: int) -> np.ndarray:
        if slot in RET_SIDE:
            return self.send_valid[region_rank]
        return self.recv_valid[region_rank]

    def overlap(self, slot: int, region_rank: int, row0: int, rows: int) -> list[tuple[int, int]]:
        """(row tile, valid rows of the region inside it) for every tile the region touches."""
        V = self.valid_per_slot(slot, region_rank)
        out = []
        a, b = row0, row0 + rows
        for tile in range(a // self.tm, -(-b // self.tm)):
            lo, hi = max(a, tile * self.tm), min(b, (tile + 1) * self.tm)
            s = lo // self.C
            vend = s * self.C + int(V[s])
            n = max(0, min(hi, vend) - lo)
            if n:
                out.append((tile, n))
        return out

    def segments(self, row0: int, rows: int) -> list[tuple[int, int]]:
        """(local expert, rows) of every expert segment inside a receive-side region of this rank."""
        out = []
        a, b = row0, row0 + rows
        for s in range(a // self.C, -(-b // self.C)):
            pre = self.pre[s, self.rank]
            for e in range(len(pre) - 1):
                lo, hi = max(a, s * self.C + int(pre[e])), min(b, s * self.C + int(pre[e + 1]))
                if hi > lo:
                    out.append((e, hi - lo))
        return out

    def expert_tiles(self, e: int) -> list[tuple[int, int]]:
        """(row tile, rows of local expert e inside it) over all slots of this rank."""
        out = []
        for s in range(self.cfg.ep):
            lo = s * self.C + int(self.pre[s, self.rank, e])
            hi = s * self.C + int(self.pre[s, self.rank, e + 1])
            for tile in range(lo // self.tm, -(-hi // self.tm)):
                n = min(hi, (tile + 1) * self.tm) - max(lo, tile * self.tm)
                if n > 0:
                    out.append((tile, n))
        return out


def _key(slot: int, tile: int, col0: int = 0, cols: int = FULL) -> tuple:
    return (slot, tile, col0, cols)


def _task_work(hw: Hardware, v: _RankView, rec, tiling, ttype: TaskType) -> dict:
    """Work of one task record: compute, reads, writes, put."""
    r = v.rank
    cfg = v.cfg
    es = v.esize[int(Slot.X)] if int(Slot.X) in v.esize else 2
    out0, in0 = rec["outputs"][0], rec["inputs"][0]
    w = dict(compute=0.0, flops=0.0, vec=0.0, rows=0, put=-1.0, dst=-1, unc=0.0, reads=[], writes=[])
    if ttype in (TaskType.ENTRY_SIGNAL, TaskType.COUNT_PUT):
        w["dst"] = int(out0["rank"])
        w["put"] = 0.0 if ttype == TaskType.ENTRY_SIGNAL else float(cfg.experts_per_rank * 4)
    elif ttype in (TaskType.DISPATCH_PUT, TaskType.BWD_DISPATCH_PUT, TaskType.COMBINE_PUT):
        d, slot = int(out0["rank"]), int(out0["slot"])
        parts = v.overlap(slot, d, int(out0["row_offset"]), int(out0["rows"]))
        rows = sum(n for _, n in parts)
        width = int(out0["cols"])
        nbytes = rows * width * es
        w.update(rows=rows, dst=d, put=float(nbytes))
        if ttype == TaskType.COMBINE_PUT:
            src = v.overlap(int(in0["slot"]), r, int(in0["row_offset"]), int(in0["rows"]))
            w["reads"] = [(_key(int(in0["slot"]), t), n * width * es, None) for t, n in src]
        else:
            w["unc"] = float(nbytes)                      # gathered rows of x / dy
        if ttype == TaskType.BWD_DISPATCH_PUT:
            w["vec"] = float(rows * width * hw.ops_reduce)   # scale by the top-k weight
        w["writes"] = [(d, _key(slot, t), n * width * es) for t, n in parts]
    elif ttype in GMM_LIKE:
        n_cols, k = int(tiling["n"]), int(tiling["k"])
        segs = v.segments(int(in0["row_offset"]), int(in0["rows"]))
        m = np.array([n for _, n in segs], dtype=np.float64)
        w["compute"] = float(cube_us(hw, m, n_cols, k).sum())
        w["flops"] = float(2.0 * m.sum() * n_cols * k)
        w["rows"] = int(m.sum())
        src = v.overlap(int(in0["slot"]), r, int(in0["row_offset"]), int(in0["rows"]))
        wslot = int(rec["inputs"][1]["slot"])
        w["reads"] = ([(_key(int(in0["slot"]), t), n * k * es, None) for t, n in src]
                      + [(_key(wslot, e), n_cols * k * es, None) for e in sorted({e for e, _ in segs})])
        dst = v.overlap(int(out0["slot"]), r, int(out0["row_offset"]), int(out0["rows"]))
        w["writes"] = [(r, _key(int(out0["slot"]), t), n * n_cols * es) for t, n in dst]
    elif ttype in (TaskType.SWIGLU, TaskType.SWIGLU_GRAD):
        # Columns of A (dA) the task covers: I, or a column block of it (act_split.py).
        inter = int(out0["cols"]) if ttype == TaskType.SWIGLU else int(in0["cols"])
        parts = v.overlap(int(out0["slot"]), r, int(out0["row_offset"]), int(out0["rows"]))
        rows = sum(n for _, n in parts)
        ops = hw.ops_swiglu if ttype == TaskType.SWIGLU else hw.ops_swiglu_grad
        w.update(rows=rows, vec=float(rows * inter * ops))
        reads = []
        for ref in rec["inputs"]:
            slot = int(ref["slot"])
            if slot in RECV_SIDE:
                reads += [(_key(slot, t), n * int(ref["cols"]) * es, None) for t, n in parts]
        w["reads"] = reads
        w["writes"] = [(r, _key(int(ref["slot"]), t), n * int(ref["cols"]) * es)
                       for ref in rec["outputs"] if int(ref["slot"]) != NO_SLOT for t, n in parts]
    elif ttype == TaskType.GMM_WEIGHT_GRAD:
        e = int(rec["expert"])
        x_ref, dy_ref = rec["inputs"][0], rec["inputs"][1]
        wg, n_cols = int(x_ref["cols"]), int(dy_ref["cols"])
        tiles = v.expert_tiles(e)
        rows = sum(n for _, n in tiles)
        w["compute"] = float(cube_us(hw, np.array([wg]), n_cols, rows)[0]) if rows else 0.0
        w["flops"] = float(2.0 * wg * n_cols * rows)
        w["rows"] = rows
        xs, ys = int(x_ref["slot"]), int(dy_ref["slot"])
        c0 = int(x_ref["col_offset"])
        w["reads"] = ([(_key(xs, t, c0, wg), n * wg * es, _key(xs, t)) for t, n in tiles]
                      + [(_key(ys, t), n * n_cols * es, None) for t, n in tiles])
        w["writes"] = [(r, _key(int(out0["slot"]), int(out0["row_offset"])), wg * n_cols * 4)]
    elif ttype in (TaskType.COMBINE_REDUCE, TaskType.BWD_COMBINE_REDUCE, TaskType.TOPK_WEIGHT_GRAD):
        tt = int(out0["rows"])
        h = cfg.hidden
        gathered = tt * cfg.topk * h * es
        w.update(rows=tt * cfg.topk, vec=float(tt * cfg.topk * h * hw.ops_reduce))
        if ttype == TaskType.TOPK_WEIGHT_GRAD:
            w["unc"] = float(gathered + tt * h * es)
            w["writes"] = [(r, _key(int(out0["slot"]), int(out0["row_offset"])), tt * cfg.topk * 4)]
        else:
            w["unc"] = float(gathered)
            w["writes"] = [(r, _key(int(out0["slot"]), int(out0["row_offset"])), tt * h * es)]
    else:
        raise SimInputError(f"rank {r}: task type {int(rec['task_type'])} has no cost model")
    if w["vec"]:
        w["compute"] = w["vec"] / hw.vector_ops_per_us
    return w


def build_workload(schedules: list[RankSchedule], counts: np.ndarray, hw: Hardware) -> Workload:
    """Flatten one direction's group of schedules into global arrays with per-task work."""
    if not schedules:
        raise SimInputError("no schedules to simulate")
    schedules = sorted(schedules, key=lambda s: s.rank)
    cfg, direction = schedules[0].cfg, schedules[0].direction_name
    if [s.rank for s in schedules] != list(range(cfg.ep)) or any(s.direction_name != direction for s in schedules):
        raise SimInputError(f"{direction}: need one schedule per rank 0..{cfg.ep - 1} of one direction, got ranks "
                            f"{[s.rank for s in schedules]}")
    if counts.shape != (cfg.ep, cfg.ep, cfg.experts_per_rank):
        raise SimInputError(f"routing counts of shape {counts.shape} do not match ep={cfg.ep}, "
                            f"E={cfg.experts_per_rank}")
    base = np.cumsum([0] + [len(s.tasks) for s in schedules])
    ebase = np.cumsum([0] + [len(s.events) for s in schedules])
    n = int(base[-1])
    cols = {k: [] for k in ("compute", "flops", "vec", "rows", "put", "dst", "unc")}
    reads, writes = [], []
    for s in schedules:
        v = _RankView(s, counts)
        for rec in s.tasks:
            w = _task_work(hw, v, rec, s.tilings[int(rec["tiling_data_position"])], TaskType(int(rec["task_type"])))
            for k in cols:
                cols[k].append(w[k])
            reads.append(w["reads"])
            writes.append(w["writes"])
    waits = np.full((n, 2), -1, dtype=np.int64)
    triggers = np.full((n, 2), -1, dtype=np.int64)
    workers = []
    for s in schedules:
        b = int(base[s.rank])
        dep = s.tasks["dependent_event"].astype(np.int64)
        waits[b:b + len(s.tasks)] = np.where(dep == NO_EVENT, -1, dep + ebase[s.rank])
        trig = s.tasks["trigger_event"].astype(np.int64)
        trank = s.tasks["trigger_rank"].astype(np.int64)
        triggers[b:b + len(s.tasks)] = np.where(trig == NO_EVENT, -1, trig + ebase[np.minimum(trank, cfg.ep - 1)])
        for qi, q in enumerate(s.queues):
            unit = 0 if int(q["queue_type"]) == QueueType.CTQ else 1
            workers.append((s.rank, unit, int(q["worker"]), s.queue_tasks(qi).astype(np.int64) + b))
    rank = np.repeat(np.arange(cfg.ep), np.diff(base)).astype(np.int32)
    ttype = np.concatenate([s.tasks["task_type"] for s in schedules]).astype(np.int32)
    unit = np.concatenate([s.tasks["queue_type"] for s in schedules]).astype(np.int8)
    return Workload(
        ep=cfg.ep, direction=direction, rank=rank, unit=unit, task_type=ttype,
        local=np.concatenate([np.arange(len(s.tasks)) for s in schedules]),
        compute_us=np.array(cols["compute"]), flops=np.array(cols["flops"]), vec_ops=np.array(cols["vec"]),
        valid_rows=np.array(cols["rows"], dtype=np.int64), put_bytes=np.array(cols["put"]),
        put_dst=np.array(cols["dst"], dtype=np.int64), uncached_bytes=np.array(cols["unc"]),
        reads=reads, writes=writes, waits=waits, triggers=triggers,
        thresholds=np.concatenate([s.events["threshold"] for s in schedules]).astype(np.int64),
        event_rank=np.repeat(np.arange(cfg.ep), np.diff(ebase)), workers=workers, base=base)
