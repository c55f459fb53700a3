"""Routing for the simulator: per-(source, destination, local expert) row counts, as the routing plan makes them.

`counts[s, d, e]` is the number of rows source rank s sends rank d for d's local expert e (docs/design.md,
"Routing-derived data"). Every source routes T * k rows; a token picks k distinct experts, so no expert gets more
than T rows from one source. Specs:
- "balanced": every expert gets T*k / (ep*E) rows from every source (remainders rotated by source rank);
- "zipf:S[:SEED]": expert popularity proportional to 1 / rank^S over a seeded random ranking of the experts,
  the same for every source (hot experts are global, so some destination ranks receive far more);
- "hot:F[:SEED]": a fraction F of all rows goes to the experts of one rank (SEED picks which), the rest balanced.
Counts that do not fit the SSC bucket (C rows per pair) are refused with the C they need, as the host plan does.
"""
from __future__ import annotations

import argparse

import numpy as np

from ..args import ValueCheckError, check_float, check_int
from ..config import MoeConfig
from ..errors import RoutingError


def _largest_remainder(total: int, weights: np.ndarray, cap: int) -> np.ndarray:
    """Integers summing to `total`, proportional to `weights`, each at most `cap` (overflow spread to others)."""
    w = np.asarray(weights, dtype=np.float64)
    out = np.zeros(len(w), dtype=np.int64)
    free = np.ones(len(w), dtype=bool)
    remaining = total
    while remaining > 0:
        ws = np.where(free, w, 0.0)
        if ws.sum() <= 0:
            ws = free.astype(np.float64)
        share = remaining * ws / ws.sum()
        base = np.floor(share).astype(np.int64)
        rem = remaining - int(base.sum())
        order = np.lexsort((np.arange(len(w)), -(share - base)))
        base[order[:rem]] += 1
        room = np.where(free, cap - out, 0)
        take = np.minimum(base, room)
        out += take
        remaining -= int(take.sum())
        free &= out < cap
        if not free.any() and remaining > 0:
            raise RoutingError(f"{total} rows cannot be routed with at most {cap} rows per expert")
    return out


def _parse(spec: str) -> tuple[str, float, int]:
    """(kind, value, seed); a zipf exponent is finite and >= 0, a hot fraction in [0, 1], a seed >= 0."""
    parts = spec.split(":")
    kind = parts[0]
    try:
        if kind == "balanced" and len(parts) == 1:
            return kind, 0.0, 0
        if kind in ("zipf", "hot") and len(parts) in (2, 3):
            value = float(parts[1])
            seed = check_int("routing seed", int(parts[2]), 0, 2**32 - 1) if len(parts) == 3 else 0
            if kind == "zipf":
                return kind, check_float("zipf exponent", value, 0.0, 100.0), seed
            return kind, check_float("hot fraction", value, 0.0, 1.0), seed
    except ValueCheckError as exc:
        raise RoutingError(f"bad routing {spec!r}: {exc}") from None
    except ValueError:
        pass
    raise RoutingError(f"bad routing {spec!r}: use balanced, zipf:S[:SEED] or hot:F[:SEED]")


def check_routing_spec(spec: str) -> None:
    """Raises RoutingError naming what is wrong with an A3 routing spec."""
    _parse(spec)


def routing_spec_arg(spec: str) -> str:
    """argparse type: a routing spec checked as the flag is parsed (before anything is compiled)."""
    try:
        _parse(spec)
    except RoutingError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return spec


def expert_weights(cfg: MoeConfig, spec: str) -> np.ndarray | None:
    kind, value, seed = _parse(spec)
    G = cfg.num_experts
    if kind == "balanced":
        return None
    rng = np.random.default_rng(seed)
    if kind == "zipf":
        if not value >= 0:
            raise RoutingError(f"zipf exponent must be >= 0, got {value}")
        ranks = rng.permutation(G)
        return 1.0 / (ranks + 1.0) ** value
    if not 0 <= value <= 1:
        raise RoutingError(f"hot fraction must be in [0, 1], got {value}")
    hot_rank = int(rng.integers(cfg.ep))
    w = np.full(G, (1 - value) / G)
    w[hot_rank * cfg.experts_per_rank:(hot_rank + 1) * cfg.experts_per_rank] += value / cfg.experts_per_rank
    return w


def route_counts(cfg: MoeConfig, spec: str = "balanced") -> np.ndarray:
    """counts[s, d, e] (int64, shape ep x ep x E) for the routing `spec`; checks the bucket."""
    G, E, ep, T, k = cfg.num_experts, cfg.experts_per_rank, cfg.ep, cfg.tokens, cfg.topk
    weights = expert_weights(cfg, spec)
    per_src = np.zeros((ep, G), dtype=np.int64)
    for s in range(ep):
        if weights is None:
            base, rem = divmod(T * k, G)
            per_src[s] = base
            per_src[s, (np.arange(rem) + s * E) % G] += 1     # rotate the remainder by source rank
        else:
            per_src[s] = _largest_remainder(T * k, weights, T)
    counts = per_src.reshape(ep, ep, E)
    check_bucket(cfg, counts)
    return counts


def check_bucket(cfg: MoeConfig, counts: np.ndarray) -> None:
    pair = counts.sum(axis=2)
    worst = int(pair.max())
    if worst > cfg.recv_rows_per_src:
        s, d = np.unravel_index(int(pair.argmax()), pair.shape)
        need = -(-worst // cfg.tile_m) * cfg.tile_m
        raise RoutingError(f"rank {s} sends {worst} rows to rank {d}; the SSC bucket holds "
                           f"C={cfg.recv_rows_per_src}; compile with --recv-rows-per-src {need}")
    if (counts < 0).any() or (counts.sum(axis=(1, 2)) != cfg.tokens * cfg.topk).any():
        raise RoutingError("routing counts must be non-negative and sum to tokens*topk per source")
