"""One EP rank's CPU-twin runtime behind a framework op (hpmoe.mindspore; reusable by hpmoe.torch).

Per call the host side (1) counts the rows this rank sends each destination (`rows_to_each_rank`), (2) the
framework agrees on the group's counts (an AllGather of those [ep] vectors: counts only, never token data),
(3) `prepare` picks the bucket every rank picks (SscCache.capacity_for on the group maximum), loads its heap
and SSCs when the bucket changes, and returns this rank's routing plan. The framework's kernels then write
the plan and inputs into the heap, launch the twin and read outputs (mindspore_ext/kernels/ms_kernels.cpp).

One session serves every layer of one shape (they share its heap: workspace sized for the bucket in use).
When the bucket grows, the previous heap is retired, not closed: layers whose backward is still pending
(their saved state lives there) finish on it; `release_retired` closes it once none is.

The heap: EP 1 uses anonymous memory; EP > 1 POSIX shared memory named after the group key and the bucket,
created by rank 0 under a temporary name and renamed when initialised, attached by the others.
"""
from __future__ import annotations

import atexit
import dataclasses
import os
import time

import numpy as np

from ..config import MoeConfig
from ..errors import HpmoeError, InputError
from ..ssc_format import Slot
from . import native
from .input_checks import check_ids
from .plan_phase import plan_or_raise
from .shm_names import owner_pid, remove_stale_segments
from .ssc_cache import SscCache

ATTACH_TIMEOUT_S = 120.0


@dataclasses.dataclass
class LoadedBucket:
    bucket: object                  # ssc_cache.Bucket
    heap: native.GroupHeap
    handle: native.RankHandle

    def segment_base(self, rank: int) -> int:
        return self.heap.base + rank * self.heap.layout.segment_bytes

    def close(self) -> None:
        self.handle.close()
        self.heap.owner = False  # names are unlinked by rank 0 explicitly
        self.heap.close()


def rows_to_each_rank(topk_ids: np.ndarray, experts_per_rank: int, ep: int) -> np.ndarray:
    """[ep] int32: rows this rank sends each destination rank (expert e lives on rank e // E_local)."""
    owner = np.asarray(topk_ids, np.int64).ravel() // experts_per_rank
    return np.bincount(owner, minlength=ep)[:ep].astype(np.int32)


def check_topk_ids(base: MoeConfig, topk_ids: np.ndarray) -> np.ndarray:
    """One rank's topk_ids [T, k]: integers in range, no expert twice per token; returned as int32."""
    ids = np.asarray(topk_ids)
    want = (base.tokens, base.topk)
    if ids.shape != want:
        raise InputError(f"topk_ids must have shape {want}, got {ids.shape}")
    check_ids("topk_ids", ids, base.num_experts)
    if base.topk > 1 and ids.size:
        s = np.sort(ids, axis=1)
        dup = np.nonzero((s[:, 1:] == s[:, :-1]).any(axis=1))[0]
        if dup.size:
            raise InputError(f"topk_ids row {int(dup[0])} names one expert twice: {ids[dup[0]].tolist()}")
    return np.ascontiguousarray(ids, np.int32)


class RankSession:
    def __init__(self, base: MoeConfig, rank: int, ssc_dir=None, group_key: str | None = None,
                 timeout_s: float = 60.0, on_load=None):
        if base.ep > 1 and not group_key:
            raise HpmoeError("an EP group larger than 1 needs a group key to name its shared heap")
        self.base, self.rank, self.group_key, self.timeout_s = base, rank, group_key, timeout_s
        self.cache = SscCache(base, rank, ssc_dir)
        self.capacity = self.cache.first_capacity()
        self.active: LoadedBucket | None = None
        self.retired: list[LoadedBucket] = []
        self.on_load = on_load  # called with the new segment address after every heap is loaded
        self._old_names: list[str] = []
        atexit.register(self.close)  # rank 0 unlinks its shared heaps even if the framework never closes us

    # ---- per call ------------------------------------------------------------------------------
    def check_ids(self, topk_ids: np.ndarray) -> np.ndarray:
        return check_topk_ids(self.base, topk_ids)

    def prepare(self, topk_ids: np.ndarray, group_rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """group_rows [ep, ep]: rows each source rank sends each destination, agreed by the whole group.
        Returns this rank's plan: topk_ids, send_rows, send_counts, token_rows (int32, contiguous)."""
        ids = self.check_ids(topk_ids)
        rows = np.asarray(group_rows, np.int64).reshape(self.base.ep, self.base.ep)
        if not np.array_equal(rows[self.rank], rows_to_each_rank(ids, self.base.experts_per_rank, self.base.ep)):
            raise HpmoeError(f"rank {self.rank}: the agreed routing counts do not match this rank's topk_ids")
        capacity = self.cache.capacity_for(int(rows.max(initial=0)), self.capacity)
        if self.active is None or capacity != self.active.bucket.cfg.recv_rows_per_src:
            self._load(self.cache.get(capacity))
        plan = plan_or_raise(self.active.bucket.cfg, ids)  # the shared plan phase (routing_plan.h)
        return tuple(np.ascontiguousarray(a, np.int32) for a in (ids, plan.send_rows, plan.send_counts,
                                                                  plan.token_rows))

    def release_retired(self, pending_on) -> None:
        """Close retired heaps on which no layer's backward is pending (pending_on(segment) -> count)."""
        keep = []
        for loaded in self.retired:
            (keep.append(loaded) if pending_on(loaded.segment_base(self.rank)) else loaded.close())
        self.retired = keep

    # ---- the active bucket ---------------------------------------------------------------------
    def segment_base(self) -> int:
        return self.active.segment_base(self.rank)

    def slot_offsets(self) -> np.ndarray:
        return np.array([self.active.heap.layout.slots[s][0] for s in Slot], np.uint64)

    def slot_bytes(self) -> np.ndarray:
        slots = self.active.heap.layout.slots
        return np.array([int(np.prod(slots[s][1])) * np.dtype(slots[s][2]).itemsize for s in Slot], np.uint64)

    def heap_bytes(self) -> int:
        """This rank's share of every heap it holds (active and retired)."""
        return sum(b.heap.layout.segment_bytes for b in ([self.active] if self.active else []) + self.retired)

    def _load(self, bucket) -> None:
        if self.active is not None:
            self.retired.append(self.active)
        cfg = bucket.cfg
        layout = native.HeapLayout(cfg, *bucket.counters)
        if cfg.ep == 1:
            heap = native.GroupHeap(layout, None)
        else:
            heap = self._shared_heap(layout, f"hpmoe-{self.group_key}-C{cfg.recv_rows_per_src}")
        handle = native.RankHandle(heap, self.rank, bucket.fwd, bucket.bwd,
                                   native.RankOptions(timeout_ms=int(self.timeout_s * 1000)))
        self.active = LoadedBucket(bucket, heap, handle)
        self.capacity = cfg.recv_rows_per_src
        if self.on_load is not None:
            self.on_load(self.segment_base())

    def _shared_heap(self, layout: native.HeapLayout, name: str) -> native.GroupHeap:
        if self.rank == 0:
            # Every rank attached the previous bucket's heap (it ran a call on it): its name can go.
            for old in self._old_names:
                native.lib().hpmoe_cpu_shm_unlink(old.encode())
            self._old_names = []
            if owner_pid(name) is None:  # an internal invariant: the sweep below must recognise this name later
                raise HpmoeError(f"shared heap name {name} does not follow runtime/shm_names.py's session pattern")
            remove_stale_segments()  # heaps of killed jobs (their launcher is gone); never a live job's
            tmp = f"{name}-init{os.getpid()}"
            heap = native.GroupHeap(layout, tmp, create=True)
            os.rename(f"/dev/shm/{tmp}", f"/dev/shm/{name}")  # peers see only an initialised heap
            heap.shm_name = name
            self._old_names.append(name)
            return heap
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while True:
            try:
                heap = native.GroupHeap(layout, name, create=False)
                heap.owner = False
                return heap
            except native.RuntimeFailure as exc:
                if time.monotonic() > deadline:
                    raise native.RuntimeFailure(f"rank {self.rank}: rank 0's heap {name} did not appear in "
                                                f"{ATTACH_TIMEOUT_S:.0f} s: {exc}") from None
                time.sleep(0.01)

    def close(self) -> None:
        for loaded in self.retired + ([self.active] if self.active else []):
            loaded.close()
        self.active, self.retired = None, []
        if self.rank == 0:
            for old in self._old_names:
                native.lib().hpmoe_cpu_shm_unlink(old.encode())
            self._old_names = []
