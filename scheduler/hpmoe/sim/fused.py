"""The SSC path end to end: one kernel launch per direction, every rank's queues simulated together.

`simulate_direction` builds the workload (workload.py), runs the engine (engine.py) with the cost model below and
summarises the result. Task time = dispatch + max(compute, memory, put), where memory is the later of the HBM and
L2 reservations and the core's own transfer time (memory.py), and a put adds its link reservations and latency.
Every number is a prediction of the hardware model, not a measurement.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..compiler import RankSchedule
from ..ssc_format import TaskType
from . import engine
from .hw import Hardware
from .memory import Device
from .workload import Workload, build_workload

UNIT_NAMES = ("AIC", "AIV")


class SscCost:
    """Cost model of the fused runtime for one direction (state: one Device per rank)."""

    def __init__(self, wl: Workload, hw: Hardware, dynamic_dispatch: bool = False):
        self.wl, self.hw = wl, hw
        self.devices = [Device(hw) for _ in range(wl.ep)]
        self.dispatch = hw.dynamic_dispatch_us if dynamic_dispatch else hw.static_dispatch_us
        self.hbm_rate, self.l2_rate = hw.hbm_bytes_per_us, hw.l2_bytes_per_us
        self.core_rate = (hw.aic_gm_gbps * 1e3, hw.aiv_gm_gbps * 1e3)
        self.link_rate, self.put_rate = hw.link_bytes_per_us, hw.aiv_put_gbps * 1e3
        self.remote_alloc = hw.remote_write_allocates_l2
        self.rank = wl.rank.tolist()
        self.unit = wl.unit.tolist()
        self.compute = wl.compute_us.tolist()
        self.put = wl.put_bytes.tolist()
        self.dst = wl.put_dst.tolist()
        self.unc = wl.uncached_bytes.tolist()
        self.hit_bytes = np.zeros(wl.num_tasks)
        self.read_bytes = np.zeros(wl.num_tasks)

    def dispatch_us(self, task: int) -> float:
        return self.dispatch

    def start(self, task: int, now: float) -> float:
        r = self.rank[task]
        dev = self.devices[r]
        hit = miss = 0.0
        for key, nbytes, full in self.wl.reads[task]:
            if dev.l2.lookup(key, nbytes, full):
                hit += nbytes
            else:
                miss += nbytes
        unc = self.unc[task]
        if unc:
            dev.l2.stream(unc)
            miss += unc
        write_local = 0.0
        write_remote = 0.0
        for d, _, nbytes in self.wl.writes[task]:
            if d == r:
                write_local += nbytes
            else:
                write_remote += nbytes
        self.hit_bytes[task], self.read_bytes[task] = hit, hit + miss
        end = now + self.compute[task]
        moved = hit + miss + write_local
        if moved:
            end = max(end, dev.hbm(now, miss + write_local, self.hbm_rate), dev.l2bw(now, hit, self.l2_rate),
                      now + moved / self.core_rate[self.unit[task]])
        nbytes = self.put[task]
        d = self.dst[task]
        if nbytes >= 0 and d != r:
            arrive = now
            if nbytes > 0:
                peer = self.devices[d]
                arrive = max(dev.egress(now, nbytes, self.link_rate, d), peer.ingress(now, nbytes, self.link_rate),
                             now + nbytes / self.put_rate)
                peer.hbm(now, write_remote, self.hbm_rate)
            end = max(end, arrive + self.hw.link_latency_us)
        return end

    def finish(self, task: int, now: float) -> None:
        r = self.rank[task]
        for d, key, nbytes in self.wl.writes[task]:
            if d == r or self.remote_alloc:
                self.devices[d].l2.insert(key, nbytes)


@dataclasses.dataclass
class DirectionResult:
    """Predicted timeline of one direction of a whole EP group."""
    direction: str
    workload: Workload
    start: np.ndarray
    end: np.ndarray
    worker: np.ndarray
    rank_latency_us: np.ndarray        # per rank: launch to its last task's end
    l2_hit_rate: np.ndarray            # per rank, by bytes read through L2-tracked blocks and uncached reads
    busy_us: np.ndarray                # [rank, unit] summed task time
    link_busy: list                    # per rank: (start, end, dst) egress reservations
    hbm_bytes: np.ndarray
    launch_us: float

    @property
    def latency_us(self) -> float:
        return float(self.rank_latency_us.max())

    def aic_bound_us(self) -> float:
        """Lower bound of the slowest rank: launch + its AIC compute spread evenly over its AIC workers."""
        wl = self.workload
        aic = wl.unit == 0
        cores = max(1, sum(1 for w in wl.workers if w[0] == 0 and w[1] == 0))
        work = np.bincount(wl.rank[aic], weights=wl.compute_us[aic], minlength=wl.ep)
        return self.launch_us + float(work.max()) / cores

    def utilisation(self, hw: Hardware) -> np.ndarray:
        """[rank, unit] mean fraction of the unit's workers busy over the rank's latency."""
        cores = np.array([len([w for w in self.workload.workers if w[0] == 0 and w[1] == u]) for u in (0, 1)])
        return self.busy_us / (cores[None, :] * self.rank_latency_us[:, None])


def simulate_direction(schedules: list[RankSchedule], counts: np.ndarray, hw: Hardware, *,
                       dynamic_dispatch: bool = False, workload: Workload | None = None) -> DirectionResult:
    wl = workload if workload is not None else build_workload(schedules, counts, hw)
    cost = SscCost(wl, hw, dynamic_dispatch)
    launch = hw.kernel_launch_us

    def describe(w: int, task: int) -> str:
        rank, unit, idx, _ = wl.workers[w]
        return f"rank {rank} {UNIT_NAMES[unit]} worker {idx} at {TaskType(int(wl.task_type[task])).name} " \
               f"(task {int(wl.local[task])})"

    def describe_event(e: int) -> str:
        r = int(wl.event_rank[e])
        return f"rank {r} event {e - int(np.searchsorted(wl.event_rank, r))}"

    res = engine.run(wl.num_tasks, wl.waits, wl.triggers, wl.thresholds, [w[3] for w in wl.workers], cost,
                     t0=launch, poll_us=hw.event_poll_us, describe=describe, describe_event=describe_event)
    ep = wl.ep
    rank_latency = np.array([res.end[wl.base[r]:wl.base[r + 1]].max() for r in range(ep)])
    dur = res.end - res.start
    busy = np.zeros((ep, 2))
    np.add.at(busy, (wl.rank, wl.unit.astype(np.int64)), dur)
    hits = np.bincount(wl.rank, weights=cost.hit_bytes, minlength=ep)
    reads = np.bincount(wl.rank, weights=cost.read_bytes, minlength=ep)
    return DirectionResult(wl.direction, wl, res.start, res.end, res.worker, rank_latency,
                           np.divide(hits, reads, out=np.zeros(ep), where=reads > 0), busy,
                           [d.link_busy for d in cost.devices], np.array([d.hbm_bytes for d in cost.devices]),
                           launch)
