"""One call for a whole prediction: SSC path and kernel-by-kernel baseline, per direction, on one routing."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from .. import ssc_io
from ..act_split import act_n_block
from ..compiler import RankSchedule, compile_schedules
from ..config import MoeConfig
from ..errors import HpmoeError
from .baseline import BaselineResult, simulate_baseline
from .fused import DirectionResult, simulate_direction
from .hw import Hardware
from .routing import check_bucket, route_counts
from .workload import build_workload


@dataclasses.dataclass
class Prediction:
    cfg: MoeConfig
    hw: Hardware
    routing: str
    counts: np.ndarray
    fused: dict[str, DirectionResult]
    baseline: dict[str, BaselineResult]

    def summary(self) -> dict:
        out = {"predicted": True, "hardware": self.hw.name, "routing": self.routing,
               "config": self.cfg.to_json(),
               "directions": {}}
        for d, r in self.fused.items():
            row = {"hpmoe_ms": r.latency_us / 1e3, "aic_bound_ms": r.aic_bound_us() / 1e3, "hpmoe_rank_ms": (r.rank_latency_us / 1e3).round(4).tolist(),
                   "l2_hit_rate": r.l2_hit_rate.round(4).tolist(),
                   "utilisation_aic_aiv": r.utilisation(self.hw).mean(axis=0).round(4).tolist()}
            b = self.baseline.get(d)
            if b is not None:
                row.update(baseline_ms=b.latency_us / 1e3, baseline_rank_ms=(b.rank_latency_us / 1e3).round(4).tolist(),
                           speedup=b.latency_us / r.latency_us,
                           baseline_ops_ms={op.name: float(op.duration_us.max()) / 1e3 for op in b.ops})
            out["directions"][d] = row
        return out


def check_hw_fits(cfg: MoeConfig, hw: Hardware) -> None:
    if cfg.claim_pool:
        raise HpmoeError("the A3 model deals static queues only: compile without --claim-pool")
    if cfg.mixed_queues:
        raise HpmoeError("the hardware model is an Ascend device, whose AIC cannot run the vector tasks mixed "
                         "queues deal to cube workers: compile with --no-mixed-queues")
    if cfg.weights_transposed:
        raise HpmoeError("the A3 model follows the AscendC kernel, which reads weights in the standard layout only: "
                         "compile without --weights-transposed")
    if cfg.expert_aligned:  # its workload reads each slot's valid rows as one prefix (sim/workload.py)
        raise HpmoeError("the A3 model does not lay out expert-aligned slots yet: compile without --expert-aligned")
    if act_n_block(cfg):
        raise HpmoeError("the A3 model follows the AscendC kernel, which runs SwiGLU on whole rows only: compile "
                         "without --act-n-block")
    if cfg.num_aic > hw.num_aic or cfg.num_aiv > hw.num_aiv:
        raise HpmoeError(f"the schedule uses {cfg.num_aic} AIC / {cfg.num_aiv} AIV workers; the hardware model "
                         f"has {hw.num_aic} AIC / {hw.num_aiv} AIV per device")


def load_ssc_dir(path: str | Path) -> list[RankSchedule]:
    files = sorted(Path(path).glob("*.ssc"))
    if not files:
        raise HpmoeError(f"no .ssc files in {path}")
    return [ssc_io.read(f) for f in files]


def predict(cfg: MoeConfig, hw: Hardware, directions: list[str], routing: str = "balanced", *,
            schedules: list[RankSchedule] | None = None, dynamic_dispatch: bool = False,
            baseline: bool = True) -> Prediction:
    check_hw_fits(cfg, hw)
    counts = route_counts(cfg, routing)
    check_bucket(cfg, counts)
    fused, base = {}, {}
    for d in directions:
        group = [s for s in schedules if s.direction_name == d] if schedules is not None else \
            compile_schedules(cfg, [d], list(range(cfg.ep)))
        wl = build_workload(group, counts, hw)
        fused[d] = simulate_direction(group, counts, hw, dynamic_dispatch=dynamic_dispatch, workload=wl)
        if baseline:
            base[d] = simulate_baseline(cfg, counts, hw, d)
    return Prediction(cfg, hw, routing, counts, fused, base)
