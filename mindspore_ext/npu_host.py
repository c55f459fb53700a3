"""Host side of HyperParallelMoEFFN on the NPU route (device_target="Ascend" with the op package installed):
what runs on the host around each launch of the aclnn op. How each CPU-twin host step maps (docs/mindspore.md,
"The NPU route"):
- routing plan: the host pyfunc `plan`, the shared algorithm (op_kernel/runtime/routing_plan.h) as on the twin;
- per-rank counts: `count_rows`, then the cell's AllGather over the EP group (HCCL on the NPU);
- bucket: one per cell, chosen when the cell is built (the op's attributes are graph constants); its compiled
  SSCs are the op's `ssc` input; routing beyond it is refused in one line;
- epoch: the invocation number per direction, counted here, the op's `epoch` input;
- window nonce: drawn by rank 0, shared over the EP group, once per cell: each cell owns a communicator of its
  own (`window_group`) whose HCCL windows hold its saved activations between forward and backward.
Nothing here has run on an NPU."""
from __future__ import annotations

import itertools
import os

import numpy as np

from hpmoe.config import make_config
from hpmoe.errors import InputError, RoutingError
from hpmoe.runtime.op_session import check_topk_ids, rows_to_each_rank
from hpmoe.runtime.plan_phase import plan_or_raise
from hpmoe.runtime.ssc_cache import SscCache

from .ascend_route import AclnnAttrs, draw_window_nonce
from .host_state import tile_rows

# AI cores the op runs on (each 1 AIC + 2 AIV workers): $HPMOE_NPU_AI_CORES, default 20. The op's tiling
# refuses more than the device has (PlatformAscendC::GetCoreNumAic) in one line.
AI_CORES = int(os.environ.get("HPMOE_NPU_AI_CORES", "20"))
TIMEOUT_MS = 30000

_window_groups = itertools.count()  # every rank builds its cells in one order, so the names agree


def agree_window_nonce(group: str, ep: int) -> int:
    """Rank 0's draw, shared with the group (an AllGather of every rank's draw as two int31 halves)."""
    nonce = draw_window_nonce()
    if ep == 1:
        return nonce
    from mindspore import Tensor, ops

    halves = np.array([[nonce & 0x7FFFFFFF, nonce >> 31]], np.int32)
    lo, hi = ops.AllGather(group)(Tensor(halves)).asnumpy()[0].astype(np.int64)
    return int(lo) | (int(hi) << 31)


def create_window_group(group: str) -> str:
    """A communicator over the EP group's ranks for one cell's op: HCCL collectives on a communicator use its
    windows as their buffers, so the count AllGather (on `group`) must not share the op's."""
    from mindspore.communication import create_group, get_process_group_ranks

    name = f"hpmoe_moe{next(_window_groups)}_{group}"[:120]
    create_group(name, get_process_group_ranks(group))
    return name


class NpuHostState:
    def __init__(self, hidden, inter, experts, topk, dtype: str, capacity_factor, ssc_dir, tokens, ep, rank,
                 group: str):
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
            raise InputError(f"hpmoe.mindspore: on the NPU route the cell needs tokens=<T per rank> when it is "
                             f"built (the op's bucket and attributes are fixed then), got tokens={tokens!r}")
        self.ep, self.rank, self.experts, self.topk = ep, rank, experts, topk
        tile = tile_rows(tokens, topk, ep)
        base = make_config(None, dict(ep=ep, tokens=tokens, hidden=hidden, inter=inter, experts_per_rank=experts,
                                      topk=topk, dtype=dtype, tile_m=tile, token_tile=tile,
                                      capacity_factor=1.25 if capacity_factor is None else float(capacity_factor),
                                      num_aic=AI_CORES, num_aiv=2 * AI_CORES))
        self.cache = SscCache(base, rank, ssc_dir)
        self.bucket = self.cache.get(self.cache.first_capacity())
        self.cfg = self.bucket.cfg
        self.ssc = {d: np.frombuffer(getattr(self.bucket, d), np.uint8).copy() for d in ("fwd", "bwd")}
        self.window_group = create_window_group(group)
        self.nonce = agree_window_nonce(group, ep)
        self.epochs = [0, 0]  # launches per direction on this cell's windows; forward 1 sets them up
        self.failure = None  # the exception a host step raised in the current call (PyNative reports it)

    def attrs(self, direction: int) -> AclnnAttrs:
        fwd, bwd = self.bucket.counters
        return AclnnAttrs(self.window_group, self.rank, direction, fwd, bwd, self.nonce, TIMEOUT_MS)

    # ---- pyfunc bodies (numpy in, numpy out) -------------------------------------------------------
    def count_rows(self, topk_ids: np.ndarray) -> np.ndarray:
        try:
            return rows_to_each_rank(check_topk_ids(self.cfg, topk_ids), self.experts, self.ep)
        except Exception as error:
            self.failure = error
            raise

    def plan(self, topk_ids: np.ndarray, group_rows: np.ndarray):
        """(send_rows [ep, C], send_counts [ep, E], token_rows [T, k], forward epoch [1] int64)."""
        try:
            return self._plan(topk_ids, group_rows)
        except Exception as error:
            self.failure = error
            raise

    def _plan(self, topk_ids: np.ndarray, group_rows: np.ndarray):
        ids = check_topk_ids(self.cfg, topk_ids)
        need = int(np.asarray(group_rows).max(initial=0))
        C = self.cfg.recv_rows_per_src
        if need > C:  # every rank sees the same agreed counts, so every rank refuses together
            raise RoutingError(f"a rank sends {need} rows to one rank; this cell's bucket holds C={C} and the NPU "
                               f"route does not grow it: build the cell with a larger capacity_factor (the "
                               f"first bucket is T*k/ep*capacity_factor) or ssc_dir SSCs compiled for C >= {need}")
        plan = plan_or_raise(self.cfg, ids)
        self.epochs[0] += 1
        return (plan.send_rows, plan.send_counts, plan.token_rows.reshape(self.cfg.tokens, self.topk),
                np.array([self.epochs[0]], np.int64))

    def backward_epoch(self, token_rows: np.ndarray) -> np.ndarray:
        """The backward's invocation number (token_rows only orders this step after the forward's plan)."""
        self.epochs[1] += 1
        return np.array([self.epochs[1]], np.int64)
