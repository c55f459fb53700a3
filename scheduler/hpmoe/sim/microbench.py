"""The paper's SwiGLU + Add microbenchmark (Section 6) on the same cost model as the SSC simulation.

SwiGLU reads M x 4096 and writes M x 2048; Add reads that M x 2048 intermediate and another M x 2048 input and
writes M x 2048. Both are split into tiles of `tile_rows` rows and run on the AIVs of one device:
- serial: two kernels; every Add tile waits until all SwiGLU tiles are done (plus a second launch);
- interleaved: one queue order S0 A0 S1 A1 ..., each Add tile waiting only on its own SwiGLU tile.
It is the controlled test of the L2 model: the interleaved order must re-read intermediates from L2.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from . import engine
from .fused import SscCost
from .hw import Hardware
from .workload import Workload

SWIGLU_IN, SWIGLU_OUT = 4096, 2048
PAPER_FIG9 = {32768: {"serial_us": 723.29, "interleaved_us": 588.38, "serial_hit": 0.0520,
                      "interleaved_hit": 0.2544}}
PAPER_FIG10 = {2048: {"static_us": 54.00, "dynamic_us": 413.00}, 32768: {"static_us": 588.38, "dynamic_us": 862.80}}


@dataclasses.dataclass
class MicroResult:
    rows: int
    mode: str
    latency_us: float
    l2_hit_rate: float
    tasks: int


def _workload(hw: Hardware, rows: int, tile_rows: int, interleaved: bool) -> Workload:
    tiles = [(r0, min(tile_rows, rows - r0)) for r0 in range(0, rows, tile_rows)]
    n = 2 * len(tiles)
    es = 2
    compute, reads, writes, unc = [], [], [], []
    for i, (r0, tr) in enumerate(tiles):                       # SwiGLU tile i = task i
        compute.append(tr * SWIGLU_OUT * hw.ops_swiglu / hw.vector_ops_per_us)
        reads.append([])
        unc.append(tr * SWIGLU_IN * es)
        writes.append([(0, ("a", i), tr * SWIGLU_OUT * es)])
    for i, (r0, tr) in enumerate(tiles):                       # Add tile i = task len(tiles) + i
        compute.append(tr * SWIGLU_OUT * 1 / hw.vector_ops_per_us)
        reads.append([(("a", i), tr * SWIGLU_OUT * es, None)])
        unc.append(tr * SWIGLU_OUT * es)
        writes.append([(0, ("out", i), tr * SWIGLU_OUT * es)])
    m = len(tiles)
    waits = np.full((n, 2), -1, dtype=np.int64)
    triggers = np.full((n, 2), -1, dtype=np.int64)
    if interleaved:
        thresholds = np.ones(m, dtype=np.int64)
        triggers[:m, 0] = np.arange(m)
        waits[m:, 0] = np.arange(m)
        order = np.ravel(np.column_stack([np.arange(m), np.arange(m) + m]))
    else:
        thresholds = np.array([m], dtype=np.int64)
        triggers[:m, 0] = 0
        waits[m:, 0] = 0
        order = np.arange(n)
    workers = [(0, 1, w, order[w::hw.num_aiv].astype(np.int64)) for w in range(hw.num_aiv)]
    zeros = np.zeros(n)
    return Workload(ep=1, direction="micro", rank=np.zeros(n, dtype=np.int32), unit=np.ones(n, dtype=np.int8),
                    task_type=np.zeros(n, dtype=np.int32), local=np.arange(n), compute_us=np.array(compute),
                    flops=zeros, vec_ops=zeros, valid_rows=np.zeros(n, dtype=np.int64), put_bytes=zeros - 1,
                    put_dst=np.full(n, -1, dtype=np.int64), uncached_bytes=np.array(unc, dtype=np.float64),
                    reads=reads, writes=writes, waits=waits, triggers=triggers, thresholds=thresholds,
                    event_rank=np.zeros(len(thresholds), dtype=np.int64), workers=workers,
                    base=np.array([0, n]))


def swiglu_add(hw: Hardware, rows: int, *, tile_rows: int = 32, interleaved: bool,
               dynamic_dispatch: bool = False) -> MicroResult:
    """Predicted latency and L2 hit rate (bytes) of SwiGLU + Add over `rows` rows."""
    wl = _workload(hw, rows, tile_rows, interleaved)
    cost = SscCost(wl, hw, dynamic_dispatch)
    res = engine.run(wl.num_tasks, wl.waits, wl.triggers, wl.thresholds, [w[3] for w in wl.workers], cost,
                     t0=hw.kernel_launch_us, poll_us=hw.event_poll_us)
    latency = float(res.end.max()) + (0.0 if interleaved else hw.kernel_launch_us)
    l2 = cost.devices[0].l2
    mode = ("interleaved" if interleaved else "serial") + ("+dynamic" if dynamic_dispatch else "")
    return MicroResult(rows, mode, latency, l2.hit_rate, wl.num_tasks)
