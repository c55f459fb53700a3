"""Per-GPU work and link traffic of one expert-parallel MoE-FFN step, from the routing alone (torch-free: the
GEMM FLOPs every benchmark counts, and the per-GPU figures of issue 19 in cuda_ep_user_step.py). A row is one
(token, expert) pair, as both paths send them: a token whose k experts live on one other rank sends k rows there.

Per rank r of an EP group with E local experts each (ids [ep, T, k], global expert ids):
- received: rows r's experts multiply (from every source, r itself included);
- sent: rows r sends to other ranks' experts; returned: rows r's experts computed for other ranks' tokens;
- a forward+backward moves sent + returned rows out of r twice: x to the experts and y back in the forward,
  dy to the experts and dx back in the backward.
"""
from __future__ import annotations

import numpy as np


def destinations(ids: np.ndarray, experts_per_rank: int) -> np.ndarray:
    """[ep, T, k] rank that holds each pair's expert."""
    if ids.ndim != 3:
        raise ValueError(f"ids must be [ep, T, k], got shape {ids.shape}")
    dest = ids // experts_per_rank
    if dest.size and (dest.min() < 0 or dest.max() >= ids.shape[0]):
        raise ValueError(f"expert ids outside [0, {ids.shape[0] * experts_per_rank}) for {ids.shape[0]} ranks "
                         f"of {experts_per_rank} experts")
    return dest


def rank_rows(ids: np.ndarray, experts_per_rank: int) -> dict[str, np.ndarray]:
    """Per rank: rows received, rows sent to other ranks, rows returned to other ranks (each [ep])."""
    dest = destinations(ids, experts_per_rank)
    ep = ids.shape[0]
    received = np.bincount(dest.reshape(-1), minlength=ep)
    sent = np.array([(dest[r] != r).sum() for r in range(ep)])
    kept = dest[0].size - sent  # every rank routes T k pairs; those not sent stay with its own experts
    return {"received": received, "sent": sent, "returned": received - kept}


def gemm_flops(rows: float, hidden: int, inter: int, backward: bool) -> float:
    """GMM1 (h -> 2I) + GMM2 (I -> h) over `rows` routed rows; with `backward`, the forward and the backward,
    which has twice the forward's (data and weight gradients)."""
    fwd = 2.0 * rows * hidden * 2 * inter + 2.0 * rows * inter * hidden
    return 3 * fwd if backward else fwd


def step_link_bytes(sent: float, returned: float, hidden: int, elem_bytes: int = 2) -> float:
    """Bytes a rank sends over its links in a forward+backward (rows of `hidden` elements)."""
    return 2.0 * (sent + returned) * hidden * elem_bytes


def per_gpu(ids: np.ndarray, experts_per_rank: int, hidden: int, inter: int, step_ms: float) -> dict[str, float]:
    """The mean over ranks of GEMM TFLOP/s and of link GB/s sent, for a step of `step_ms` (the slowest rank's),
    and the most rows any rank's experts received against the mean (how uneven the routing is)."""
    if step_ms <= 0:
        raise ValueError(f"step_ms must be positive, got {step_ms}")
    rows = rank_rows(ids, experts_per_rank)
    seconds = step_ms / 1e3
    mean_rows = float(rows["received"].mean())
    return {"tflops_per_gpu": gemm_flops(mean_rows, hidden, inter, True) / seconds / 1e12,
            "link_gb_s_per_gpu": float(np.mean([step_link_bytes(s, r, hidden) for s, r in
                                                zip(rows["sent"], rows["returned"])])) / seconds / 1e9,
            "max_over_mean_rows": float(rows["received"].max()) / mean_rows if mean_rows else 0.0}
