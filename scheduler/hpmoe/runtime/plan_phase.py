"""The routing plan phase as the runtimes run it (op_kernel/runtime/routing_plan.h through the CPU twin's C
ABI): the same plan as the numpy reference `routing.plan_rank`, built by the code every backend shares."""
from __future__ import annotations

import ctypes

import numpy as np

from ..config import MoeConfig
from ..errors import RoutingError
from . import native
from .routing import RankPlan


def build_plan(cfg: MoeConfig, topk_ids_rank: np.ndarray, tokens: tuple[int, int] | None = None
               ) -> tuple[RankPlan, int]:
    """(plan, need): need is the most rows this rank sends one destination; when need > C the plan is
    incomplete (use `plan_or_raise`). Out-of-range ids raise RoutingError naming the first one. tokens:
    (begin, end), the plan of those tokens only (a pass; the others' token_rows are -1)."""
    ep, E, C, T, k = cfg.ep, cfg.experts_per_rank, cfg.recv_rows_per_src, cfg.tokens, cfg.topk
    ids = np.ascontiguousarray(np.asarray(topk_ids_rank).reshape(T * k), np.int32)
    plan = RankPlan(np.empty((ep, C), np.int32), np.empty((ep, E), np.int32), np.empty((T, k), np.int32))
    need, bad = ctypes.c_uint32(0), ctypes.c_int64(-1)
    begin, end = tokens if tokens is not None else (0, T)
    native.lib().hpmoe_cpu_plan_range(T, k, ep, E, C, cfg.align_rows, begin, end, ids.ctypes.data,
                                      plan.send_counts.ctypes.data, plan.send_rows.ctypes.data,
                                      plan.token_rows.ctypes.data, ctypes.byref(need), ctypes.byref(bad))
    if bad.value >= 0:
        t, j = divmod(bad.value, k)
        raise RoutingError(f"topk_ids[{t}, {j}] = {int(ids[bad.value])} is outside [0, {ep * E})")
    return plan, int(need.value)


def plan_or_raise(cfg: MoeConfig, topk_ids_rank: np.ndarray, tokens: tuple[int, int] | None = None) -> RankPlan:
    plan, need = build_plan(cfg, topk_ids_rank, tokens)
    if need > cfg.recv_rows_per_src:
        raise RoutingError(f"this rank sends {need} rows to one rank; the SSC bucket holds C={cfg.recv_rows_per_src}")
    return plan
