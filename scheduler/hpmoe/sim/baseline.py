"""Kernel-by-kernel baseline on the same hardware model: full-device operators, each waiting for the previous.

Forward: Permute -> AllToAllV (dispatch) -> GMM1 -> SwiGLU -> GMM2 -> AllToAllV (combine) -> Unpermute.
Backward: Permute(dy) -> AllToAllV -> GMM_act_grad -> GMM_w2_grad -> SwiGLU_grad -> GMM_gate_grad -> GMM_w1_grad
-> AllToAllV -> Unpermute -> TopkWeightGrad. (The MindFormers path permutes and unpermutes tokens around the
collectives; the SSC path fuses both into its puts and reduces.)

Each compute kernel pays kernel_launch_us and takes max(compute, HBM traffic) with its whole device: a GMM
is cut into cube_block_m x cube_block_n base blocks per expert, list-scheduled over num_aic cores (so tails and
wave quantisation show), every operand crosses HBM once. An AllToAllV is a collective: it starts when every rank
has reached it and lasts as long as the slowest rank's max(egress, ingress) bytes over the link, plus its
host-driven overheads. The predicted latency of a rank is therefore the sum of its op times where routing is
balanced, and the sum of per-segment maxima otherwise.
"""
from __future__ import annotations

import dataclasses
import heapq

import numpy as np

from ..config import MoeConfig
from ..ssc_format import DTYPE_BYTES
from .hw import Hardware
from .workload import cube_us


@dataclasses.dataclass
class BaselineOp:
    name: str
    kind: str                  # "aic", "aiv" or "comm"
    duration_us: np.ndarray    # per rank (a collective: the group-wide duration on every rank)
    start_us: np.ndarray
    end_us: np.ndarray


@dataclasses.dataclass
class BaselineResult:
    direction: str
    ops: list[BaselineOp]

    @property
    def rank_latency_us(self) -> np.ndarray:
        return self.ops[-1].end_us

    @property
    def latency_us(self) -> float:
        return float(self.rank_latency_us.max())


def _list_schedule(times: np.ndarray, cores: int) -> float:
    """Makespan of blocks handed in order to the earliest free core."""
    if len(times) == 0:
        return 0.0
    if len(times) <= cores:
        return float(times.max())
    free = [0.0] * cores
    for t in times.tolist():
        heapq.heapreplace(free, free[0] + t)
    return max(free)


def gmm_us(hw: Hardware, rows: np.ndarray, n: int, k: int | np.ndarray, *, weight_grad: bool = False,
           es: int = 2) -> float:
    """A grouped GEMM over experts with `rows[e]` rows (or, for weight_grad, reduction length rows[e])."""
    bm, bn = hw.cube_block_m, hw.cube_block_n
    blocks = []
    for r in rows.tolist():
        if r <= 0:
            continue
        if weight_grad:   # output n x k per expert (here n = m dim of dW, k = its cols), reduce over r rows
            m_tiles = [bm] * (n // bm) + ([n % bm] if n % bm else [])
            t = cube_us(hw, np.array(m_tiles, dtype=np.float64), bn, r)
            blocks.append(np.repeat(t, -(-int(k) // bn)))
        else:
            m_tiles = [bm] * (r // bm) + ([r % bm] if r % bm else [])
            t = cube_us(hw, np.array(m_tiles, dtype=np.float64), bn, k)
            blocks.append(np.repeat(t, -(-n // bn)))
    compute = _list_schedule(np.concatenate(blocks) if blocks else np.zeros(0), hw.num_aic)
    active = int((rows > 0).sum())
    total_rows = int(rows.sum())
    if weight_grad:   # read X_e (rows x n) and dY_e (rows x k), write fp32 n x k per expert
        nbytes = total_rows * (n + int(k)) * es + active * n * int(k) * 4
    else:             # read rows x k, weights k x n per expert, write rows x n
        nbytes = total_rows * (int(k) + n) * es + active * int(k) * n * es
    return hw.kernel_launch_us + max(compute, nbytes / hw.hbm_bytes_per_us)


def vector_us(hw: Hardware, nbytes: float, ops: float) -> float:
    return hw.kernel_launch_us + max(nbytes / hw.hbm_bytes_per_us, ops / (hw.num_aiv * hw.vector_ops_per_us))


def alltoall_us(hw: Hardware, cfg: MoeConfig, rows: np.ndarray, width: int, es: int) -> np.ndarray:
    """Per-rank duration of an AllToAllV moving rows[s, d] rows of `width` elements from s to d."""
    off = rows * (1 - np.eye(cfg.ep, dtype=np.int64))
    out_b = off.sum(axis=1) * width * es
    in_b = off.sum(axis=0) * width * es
    local = np.diag(rows) * width * es * 2
    wire = np.maximum(out_b, in_b) / hw.link_bytes_per_us + (hw.link_latency_us if cfg.ep > 1 else 0.0)
    return (hw.collective_overhead_us + hw.collective_per_peer_us * (cfg.ep - 1)
            + np.maximum(wire, local / hw.hbm_bytes_per_us))


def simulate_baseline(cfg: MoeConfig, counts: np.ndarray, hw: Hardware, direction: str) -> BaselineResult:
    ep, T, h, I = cfg.ep, cfg.tokens, cfg.hidden, cfg.inter
    es = DTYPE_BYTES[cfg.dtype_enum]
    pair = counts.sum(axis=2)                       # [s, d]
    sent = pair.sum(axis=1)                         # rows each rank sends (T*k)
    per_expert = counts.sum(axis=0)                 # [d, e] rows each rank's experts get
    recv = per_expert.sum(axis=1)
    plan: list[tuple[str, str, np.ndarray]] = []

    def each(fn) -> np.ndarray:
        return np.array([fn(r) for r in range(ep)], dtype=np.float64)

    def perm(name: str, ops_per: float) -> None:
        plan.append((name, "aiv", each(lambda r: vector_us(hw, (T + sent[r]) * h * es, sent[r] * h * ops_per))))

    def gmm(name: str, n: int, kk: int) -> None:
        plan.append((name, "aic", each(lambda r: gmm_us(hw, per_expert[r], n, kk, es=es))))

    def wgrad(name: str, m: int, n: int) -> None:
        plan.append((name, "aic", each(lambda r: gmm_us(hw, per_expert[r], m, n, weight_grad=True, es=es))))

    if direction == "fwd":
        perm("Permute", 0.0)
        plan.append(("Dispatch AllToAllV", "comm", alltoall_us(hw, cfg, pair, h, es)))
        gmm("GMM1", 2 * I, h)
        plan.append(("SwiGLU", "aiv", each(lambda r: vector_us(hw, recv[r] * 3 * I * es,
                                                                recv[r] * I * hw.ops_swiglu))))
        gmm("GMM2", h, I)
        plan.append(("Combine AllToAllV", "comm", alltoall_us(hw, cfg, pair.T, h, es)))
        perm("Unpermute+weighted sum", hw.ops_reduce)
    else:
        perm("Permute dy", hw.ops_reduce)
        plan.append(("Dispatch AllToAllV", "comm", alltoall_us(hw, cfg, pair, h, es)))
        gmm("GMM_act_grad", I, h)
        wgrad("GMM_w2_grad", I, h)
        plan.append(("SwiGLU_grad", "aiv", each(lambda r: vector_us(hw, recv[r] * 5 * I * es,
                                                                     recv[r] * I * hw.ops_swiglu_grad))))
        gmm("GMM_gate_grad", h, 2 * I)
        wgrad("GMM_w1_grad", h, 2 * I)
        plan.append(("Combine AllToAllV", "comm", alltoall_us(hw, cfg, pair.T, h, es)))
        perm("Unpermute sum", hw.ops_reduce)
        plan.append(("TopkWeightGrad", "aiv", each(lambda r: vector_us(hw, (sent[r] + T) * h * es,
                                                                        sent[r] * h * hw.ops_reduce))))
    t = np.zeros(ep)
    ops = []
    for name, kind, dur in plan:
        if kind == "comm":
            begin = np.full(ep, t.max())
            dur = np.full(ep, dur.max())
        else:
            begin = t.copy()
        t = begin + dur
        ops.append(BaselineOp(name, kind, dur, begin, t.copy()))
    return BaselineResult(direction, ops)
