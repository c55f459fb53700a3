"""Tile-size tuner: coordinate search over tile_m, wgrad_tile, token_tile and the AIV worker allotment that
minimises the predicted fwd + bwd latency (max over ranks) under the device-memory budget.

Split counts follow from the tile sizes (row tiles = ep * C / tile_m, weight-gradient tiles = E * dim /
wgrad_tile, reduce tiles = T / token_tile), so searching sizes searches splits. Each candidate is compiled
and simulated on the given routing; a candidate the config validator refuses, or whose SSC tensors exceed
hw.memory_budget_bytes, is skipped with its reason. The search starts from the given config, visits one
parameter at a time with the others fixed, keeps the best, and repeats until a round changes nothing.
Everything it reports is predicted.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

from ..compiler import build_group_tasks, schedule_rank
from ..config import MoeConfig
from ..coordinate_search import coordinate_descent
from ..errors import ConfigError, HpmoeError
from .api import predict
from .hw import Hardware

TILE_M = (64, 128, 256, 512)
WGRAD_TILE = (128, 256, 512, 1024)
TOKEN_TILE = (128, 256, 512, 1024)


@dataclasses.dataclass
class Candidate:
    params: dict
    cfg: MoeConfig | None
    fwd_us: float = math.inf
    bwd_us: float = math.inf
    memory_bytes: int = 0
    skipped: str = ""

    @property
    def total_us(self) -> float:
        return self.fwd_us + self.bwd_us


@dataclasses.dataclass
class TuneResult:
    start: Candidate
    best: Candidate
    tried: list[Candidate]

    @property
    def gain(self) -> float:
        return self.start.total_us / self.best.total_us


def memory_bytes(cfg: MoeConfig) -> int:
    """Bytes of every tensor slot either direction's SSC declares (saved state counted once)."""
    slots = {}
    for direction in ("fwd", "bwd"):
        group = build_group_tasks(cfg, direction)
        for t in schedule_rank(group, 0).tensors:
            slots[int(t["slot"])] = int(t["bytes"])
    return sum(slots.values())


def search_space(cfg: MoeConfig, hw: Hardware) -> dict[str, tuple]:
    aiv = tuple(sorted({hw.num_aiv, max(1, hw.num_aiv // 2), cfg.num_aiv}, reverse=True))
    return {"tile_m": TILE_M, "wgrad_tile": WGRAD_TILE, "token_tile": TOKEN_TILE, "num_aiv": aiv}


def tune(cfg: MoeConfig, hw: Hardware, routing: str = "balanced", *, rounds: int = 3,
         space: dict[str, tuple] | None = None, log: Callable[[str], None] | None = None) -> TuneResult:
    space = space or search_space(cfg, hw)
    derived = cfg.replace(recv_rows_per_src=0).recv_rows_per_src
    fixed_c = 0 if derived == cfg.recv_rows_per_src else cfg.recv_rows_per_src   # keep a C the user chose
    seen: dict[tuple, Candidate] = {}

    def evaluate(params: dict) -> Candidate:
        key = tuple(sorted(params.items()))
        if key in seen:
            return seen[key]
        cand = Candidate(dict(params), None)
        try:
            c = cfg.replace(recv_rows_per_src=fixed_c, **params)
            cand.cfg = c
            cand.memory_bytes = memory_bytes(c)
            if cand.memory_bytes > hw.memory_budget_bytes:
                cand.skipped = (f"SSC tensors take {cand.memory_bytes / 2**30:.1f} GiB > budget "
                                f"{hw.memory_budget_bytes / 2**30:.1f} GiB")
            else:
                pred = predict(c, hw, ["fwd", "bwd"], routing, baseline=False)
                cand.fwd_us, cand.bwd_us = pred.fused["fwd"].latency_us, pred.fused["bwd"].latency_us
        except (ConfigError, HpmoeError) as exc:
            cand.skipped = str(exc)
        seen[key] = cand
        if log:
            state = cand.skipped or f"predicted fwd {cand.fwd_us / 1e3:.3f} + bwd {cand.bwd_us / 1e3:.3f} = " \
                                    f"{cand.total_us / 1e3:.3f} ms"
            log(f"  {' '.join(f'{k}={v}' for k, v in params.items())}: {state}")
        return cand

    current = {name: getattr(cfg, name) for name in space}
    start = evaluate(current)
    if start.skipped:
        raise HpmoeError(f"the starting config cannot be simulated: {start.skipped}")
    best = coordinate_descent(start, space, evaluate, lambda c, b: c.total_us < b.total_us - 1e-6, rounds)
    return TuneResult(start, best, list(seen.values()))
