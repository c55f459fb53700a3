"""Per-device memory and link state: an LRU model of L2 and bandwidth reservations.

L2: an LRU over named byte blocks (workload.py names them), capacity l2_mib * l2_usable_fraction. A read looks a
block up (a column stripe also hits when its full-width tile is resident) and allocates it on a miss; a task's
outputs are inserted when it finishes. Reads of never-produced data (inputs, gathers) pass through L2 as unnamed
blocks and evict like any other. Writes are charged to HBM (the paper's SwiGLU+Add numbers fit that).

Bandwidth: HBM, L2 and each device's link egress and ingress are FIFO reservation pointers. A task that moves B
bytes over a resource reserves B / rate from max(now, pointer); the aggregate rate is never exceeded while each
task still overlaps its own transfers with its compute. Egress and ingress are reserved independently, so a
destination that every rank targets at once (no RATR) becomes a hotspot and its puts finish late.
"""
from __future__ import annotations

from collections import OrderedDict

from .hw import Hardware


class L2Cache:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.used = 0
        self.blocks: OrderedDict[tuple, int] = OrderedDict()
        self.hit_bytes = 0.0
        self.miss_bytes = 0.0
        self._streams = 0

    def lookup(self, key: tuple, nbytes: int, full_key: tuple | None = None) -> bool:
        """Read `nbytes` of block `key`; True on a hit. A miss allocates the block."""
        blocks = self.blocks
        if key in blocks:
            blocks.move_to_end(key)
            self.hit_bytes += nbytes
            return True
        if full_key is not None and full_key in blocks:
            blocks.move_to_end(full_key)
            self.hit_bytes += nbytes
            return True
        self.miss_bytes += nbytes
        self.insert(key, nbytes)
        return False

    def stream(self, nbytes: float) -> None:
        """Bytes read from HBM that nothing will look up again (inputs, gathers) still take L2 space."""
        if nbytes > 0:
            self.miss_bytes += nbytes
            self._streams += 1
            self.insert(("stream", self._streams), int(nbytes))

    def insert(self, key: tuple, nbytes: int) -> None:
        blocks = self.blocks
        old = blocks.pop(key, None)
        if old is not None:
            self.used -= old
        if nbytes <= 0 or nbytes > self.capacity:
            return
        while self.used + nbytes > self.capacity:
            _, size = blocks.popitem(last=False)
            self.used -= size
        blocks[key] = nbytes
        self.used += nbytes

    @property
    def hit_rate(self) -> float:
        total = self.hit_bytes + self.miss_bytes
        return self.hit_bytes / total if total else 0.0


class Device:
    """One rank's device: L2, HBM and L2 bandwidth pointers, link egress/ingress pointers, counters."""

    def __init__(self, hw: Hardware):
        self.l2 = L2Cache(hw.l2_capacity)
        self.hbm_free = 0.0
        self.l2bw_free = 0.0
        self.egress_free = 0.0
        self.ingress_free = 0.0
        self.hbm_bytes = 0.0
        self.link_out_bytes = 0.0
        self.link_in_bytes = 0.0
        self.link_busy: list[tuple[float, float, int]] = []   # (start, end, dst) of egress reservations

    @staticmethod
    def reserve(pointer: float, now: float, duration: float) -> float:
        return max(pointer, now) + duration

    def hbm(self, now: float, nbytes: float, rate: float) -> float:
        if nbytes <= 0:
            return now
        self.hbm_bytes += nbytes
        self.hbm_free = self.reserve(self.hbm_free, now, nbytes / rate)
        return self.hbm_free

    def l2bw(self, now: float, nbytes: float, rate: float) -> float:
        if nbytes <= 0:
            return now
        self.l2bw_free = self.reserve(self.l2bw_free, now, nbytes / rate)
        return self.l2bw_free

    def egress(self, now: float, nbytes: float, rate: float, dst: int) -> float:
        start = max(self.egress_free, now)
        self.egress_free = start + nbytes / rate
        self.link_out_bytes += nbytes
        self.link_busy.append((start, self.egress_free, dst))
        return self.egress_free

    def ingress(self, now: float, nbytes: float, rate: float) -> float:
        self.link_in_bytes += nbytes
        self.ingress_free = self.reserve(self.ingress_free, now, nbytes / rate)
        return self.ingress_free
