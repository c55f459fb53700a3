"""Routing: test routings (balanced, random, skewed, empty) and the host-side routing plan of docs/design.md.

The plan of source rank r, from its topk_ids [T, k] (global expert ids; expert e lives on rank e // E_local):
  send_rows[d][i]   the t*k + j carried by row i of r's slot on rank d (-1 = pad), sorted by local expert on d,
                    then by t*k + j; with expert_aligned each local expert's first row is a multiple of tile_m
                    (pads between experts);
  send_counts[d][e] rows r sends rank d for its local expert e;
  token_rows[t][j]  row of (t, j) in r's return buffers: d*C + i.
Routing that needs more than C rows for some (source, destination) pair is refused before anything runs.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..config import MoeConfig, round_up
from ..errors import RoutingError

ROUTINGS = ("balanced", "random", "skewed", "empty")


@dataclasses.dataclass
class RankPlan:
    send_rows: np.ndarray    # [ep, C] int32
    send_counts: np.ndarray  # [ep, E] int32
    token_rows: np.ndarray   # [T, k] int32


def _distinct_choice(rng: np.random.Generator, n: int, k: int, p: np.ndarray, rows: int) -> np.ndarray:
    """rows x k distinct ids from range(n) drawn without replacement with probabilities p (Gumbel top-k)."""
    keys = np.log(p)[None, :] - np.log(-np.log(rng.random((rows, n))))
    return np.argsort(-keys, axis=1, kind="stable")[:, :k]


def make_routing(cfg: MoeConfig, kind: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """topk_ids [ep, T, k] int32 and topk_weights [ep, T, k] float32 (positive, each row sums to 1)."""
    if kind not in ROUTINGS:
        raise RoutingError(f"unknown routing {kind!r}; choose one of {', '.join(ROUTINGS)}")
    ep, T, k, n = cfg.ep, cfg.tokens, cfg.topk, cfg.num_experts
    rng = np.random.default_rng(seed)
    if kind == "balanced":
        # Consecutive (t, j) walk the experts round-robin: k distinct ids per token, equal load per expert.
        base = (np.arange(T)[:, None] * k + np.arange(k)[None, :])
        ids = np.stack([(base + r * T * k) % n for r in range(ep)])
    elif kind == "random":
        ids = np.stack([_distinct_choice(rng, n, k, np.full(n, 1.0 / n), T) for _ in range(ep)])
    elif kind == "skewed":
        # Zipf-like popularity over a random expert order: a few experts take most rows.
        p = 1.0 / np.arange(1, n + 1) ** 1.5
        p = p[rng.permutation(n)]
        ids = np.stack([_distinct_choice(rng, n, k, p / p.sum(), T) for _ in range(ep)])
    else:
        # Only every other expert is ever chosen (expert 1, 3, ... receive nothing) when k allows it.
        allowed = np.arange(0, n, 2) if (n + 1) // 2 >= k else np.arange(n - 1)
        if len(allowed) < k or len(allowed) == n:
            raise RoutingError(f"routing 'empty' needs topk={k} < number of experts {n}")
        choice = np.stack([_distinct_choice(rng, len(allowed), k, np.full(len(allowed), 1.0 / len(allowed)), T)
                           for _ in range(ep)])
        ids = allowed[choice]
    logits = rng.standard_normal((ep, T, k))
    weights = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
    return ids.astype(np.int32), weights.astype(np.float32)


def rows_needed(cfg: MoeConfig, topk_ids: np.ndarray) -> np.ndarray:
    """[ep source, ep destination] rows each source takes of each destination's slot (with expert_aligned,
    the pads between experts included)."""
    ids = np.asarray(topk_ids, np.int64)
    per_expert = np.stack([np.bincount(ids[r].ravel(), minlength=cfg.num_experts)[:cfg.num_experts]
                           for r in range(cfg.ep)])
    spans = round_up(per_expert, cfg.align_rows)
    return spans.reshape(cfg.ep, cfg.ep, cfg.experts_per_rank).sum(axis=2)


def bucket_for(cfg: MoeConfig, topk_ids: np.ndarray) -> int:
    """Smallest C (multiple of tile_m, at least one tile) that holds this routing."""
    need = int(rows_needed(cfg, topk_ids).max(initial=0))
    return max(cfg.tile_m, round_up(need, cfg.tile_m))


def check_routing(cfg: MoeConfig, topk_ids: np.ndarray, topk_weights: np.ndarray, bucket: bool = True) -> None:
    """Shape, range and (unless `bucket` is False: a pass of the speculative bucket, whose plan checks its own
    tokens' rows) bucket checks; raises RoutingError naming the first problem."""
    ids = np.asarray(topk_ids)
    shape = (cfg.ep, cfg.tokens, cfg.topk)
    if ids.shape != shape or np.asarray(topk_weights).shape != shape:
        raise RoutingError(f"topk_ids/topk_weights must have shape {shape}, got {ids.shape} and "
                           f"{np.asarray(topk_weights).shape}")
    if not np.issubdtype(ids.dtype, np.integer):
        raise RoutingError(f"topk_ids must be integers, got {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= cfg.num_experts):
        raise RoutingError(f"topk_ids must lie in [0, {cfg.num_experts}), got [{ids.min()}, {ids.max()}]")
    if not np.all(np.isfinite(topk_weights)):
        raise RoutingError("topk_weights holds a non-finite value")
    if not bucket:
        return
    need = rows_needed(cfg, ids)
    src, dst = np.unravel_index(int(np.argmax(need)), need.shape)
    if need[src, dst] > cfg.recv_rows_per_src:
        raise RoutingError(f"rank {src} sends {need[src, dst]} rows to rank {dst}; the SSC bucket holds "
                           f"C={cfg.recv_rows_per_src}; compile with --recv-rows-per-src {bucket_for(cfg, ids)}")


def plan_rank(cfg: MoeConfig, topk_ids_rank: np.ndarray, tokens: tuple[int, int] | None = None) -> RankPlan:
    """The routing plan of one source rank (assumes check_routing passed); with tokens=(begin, end), of those
    tokens only (a pass of the speculative bucket: the others' entries get no row, token_rows -1)."""
    ep, E, C, T, k = cfg.ep, cfg.experts_per_rank, cfg.recv_rows_per_src, cfg.tokens, cfg.topk
    begin, end = tokens if tokens is not None else (0, T)
    ids = np.asarray(topk_ids_rank, np.int64).reshape(T * k)
    routed = np.arange(begin * k, end * k, dtype=np.int64)
    plan = _plan_entries(cfg, ids[routed], routed)
    token_rows = np.full(T * k, -1, np.int32)
    token_rows[routed] = plan.token_rows
    return RankPlan(plan.send_rows, plan.send_counts, token_rows.reshape(T, k))


def _plan_entries(cfg: MoeConfig, ids: np.ndarray, tk: np.ndarray) -> RankPlan:
    """The plan of the entries t*k + j = tk (ascending) with expert ids `ids`; token_rows flat, one per entry."""
    ep, E, C = cfg.ep, cfg.experts_per_rank, cfg.recv_rows_per_src
    dest, local = ids // E, ids % E
    order = np.lexsort((tk, local, dest))  # by destination, then local expert, then t*k + j
    send_counts = np.zeros((ep, E), np.int32)
    np.add.at(send_counts, (dest, local), 1)
    # First row of each (destination, local expert): the spans of the lower experts there.
    spans = round_up(send_counts.astype(np.int64), cfg.align_rows)
    first = np.cumsum(spans, axis=1) - spans
    flat = (dest * E + local)[order]
    expert_starts = np.searchsorted(flat, np.arange(ep * E))  # first sorted index of each global expert
    position = np.empty(len(ids), np.int64)
    position[order] = first.reshape(-1)[flat] + np.arange(len(ids)) - expert_starts[flat]
    send_rows = np.full((ep, C), -1, np.int32)
    send_rows[dest[order], position[order]] = tk[order]
    return RankPlan(send_rows, send_counts, (dest * C + position).astype(np.int32))
