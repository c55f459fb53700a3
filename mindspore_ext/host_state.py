"""Host side of one HyperParallelMoEFFN: the rank session per token count T (one shape bucket family each),
the aot context id its kernels use, and the two pyfunc steps that run before the aot forward kernel:
`count_rows` (this rank's rows to each destination) and `plan` (bucket choice on the group's agreed counts,
heap binding, routing plan into the heap). Framework-neutral work lives in hpmoe.runtime.op_session."""
from __future__ import annotations

import itertools
import os
import threading

import numpy as np

from hpmoe.config import make_config
from hpmoe.runtime.op_session import RankSession, rows_to_each_rank

from . import kernel_library

_next_context = itertools.count(1)
_lock = threading.Lock()

# Tiles of the CPU twin's SSCs: rows per tile scale with the balanced per-source load (at least 16). Worker
# threads per rank (cube, vector): $HPMOE_MS_WORKERS="aic,aiv", default one each (every rank of an msrun
# group shares this machine's 2 cores; more threads only add bounded-wait naps).
WORKERS_AIC, WORKERS_AIV = (int(v) for v in os.environ.get("HPMOE_MS_WORKERS", "1,1").split(","))


def tile_rows(tokens: int, topk: int, ep: int) -> int:
    balanced = max(1, tokens * topk // ep)
    return int(min(128, max(16, 1 << (balanced // 4).bit_length())))


# Sessions of this process, one per (group, shape, dtype, T, ssc_dir): every layer of one shape shares it,
# and with it one heap (all_sessions() lists them for memory reports).
_sessions: dict[tuple, RankSession] = {}


def all_sessions() -> list[RankSession]:
    return list(_sessions.values())


class HostState:
    def __init__(self, hidden, inter, experts, topk, dtype: str, capacity_factor, ssc_dir, ep, rank, group_key):
        self.hidden, self.inter, self.experts, self.topk, self.dtype = hidden, inter, experts, topk, dtype
        self.capacity_factor = 1.25 if capacity_factor is None else float(capacity_factor)
        self.ssc_dir, self.ep, self.rank, self.group_key = ssc_dir, ep, rank, group_key
        with _lock:
            self.context_id = next(_next_context)
        self.plan_arrays = None  # this layer's routing plan of its last call (the kernels read it)
        self.failure = None  # the exception a host step raised in the current call (PyNative reports it)

    def base_config(self, tokens: int):
        tile = tile_rows(tokens, self.topk, self.ep)
        return make_config(None, dict(ep=self.ep, tokens=tokens, hidden=self.hidden, inter=self.inter,
                                      experts_per_rank=self.experts, topk=self.topk, dtype=self.dtype,
                                      tile_m=tile, token_tile=tile, capacity_factor=self.capacity_factor,
                                      num_aic=WORKERS_AIC, num_aiv=WORKERS_AIV))

    def session(self, tokens: int) -> RankSession:
        sig = (self.group_key, self.ep, self.rank, self.hidden, self.inter, self.experts, self.topk, self.dtype,
               tokens, self.capacity_factor, str(self.ssc_dir))
        with _lock:
            if sig not in _sessions:
                key = None
                if self.group_key:
                    key = (f"{self.group_key}-h{self.hidden}-i{self.inter}-e{self.experts}-k{self.topk}-"
                           f"{self.dtype}-t{tokens}-s{len(_sessions)}")
                _sessions[sig] = RankSession(self.base_config(tokens), self.rank, self.ssc_dir, key,
                                             on_load=kernel_library.heap_created)
            return _sessions[sig]

    # ---- pyfunc bodies (numpy in, numpy out) -------------------------------------------------------
    def count_rows(self, topk_ids: np.ndarray) -> np.ndarray:
        try:
            ids = self.session(topk_ids.shape[0]).check_ids(topk_ids)
        except Exception as error:
            self._unbind_stale_plan(error)
            raise
        return rows_to_each_rank(ids, self.experts, self.ep)

    def plan(self, topk_ids: np.ndarray, group_rows: np.ndarray) -> np.ndarray:
        session = self.session(topk_ids.shape[0])
        try:
            self.plan_arrays = session.prepare(topk_ids, group_rows)
        except Exception as error:
            self._unbind_stale_plan(error)
            raise
        kernel_library.bind(self.context_id, session, self.plan_arrays)
        session.release_retired(kernel_library.pending_on)
        return np.array([self.context_id], np.int32)

    def _unbind_stale_plan(self, error: Exception) -> None:
        # A failed host step must not leave the previous call's plan bound: in async PyNative the forward
        # kernel may still be launched, and it must fail rather than run on stale routing.
        self.failure = error
        self.plan_arrays = None
        kernel_library.unbind(self.context_id)

    def close(self) -> None:
        kernel_library.unbind(self.context_id)
