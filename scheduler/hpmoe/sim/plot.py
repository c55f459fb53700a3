"""PNG timeline of a prediction: AIC / AIV occupancy and link use over time, next to the baseline's kernels.

For each direction: the top panel shows, for the SSC path, the fraction of AIC workers busy, AIV workers busy
(communication tasks separately) and the link egress in use, averaged over ranks (the slowest rank dashed); the
bottom panel shows the kernel-by-kernel baseline's operators on the same time axis. Every curve is predicted.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .api import Prediction
from .workload import PUT_TYPES

KIND_COLOURS = {"aic": "tab:blue", "aiv": "tab:orange", "comm": "tab:green"}


def occupancy(starts: np.ndarray, ends: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Number of intervals [start, end) covering each grid time."""
    s, e = np.sort(starts), np.sort(ends)
    return np.searchsorted(s, grid, side="right") - np.searchsorted(e, grid, side="right")


def plot_prediction(pred: Prediction, path: str | Path, bins: int = 800) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dirs = list(pred.fused)
    fig, axes = plt.subplots(2 * len(dirs), 1, figsize=(12, 4.2 * len(dirs)), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1] * len(dirs)})
    for i, d in enumerate(dirs):
        res, wl = pred.fused[d], pred.fused[d].workload
        base = pred.baseline.get(d)
        horizon = max(res.latency_us, base.latency_us if base else 0.0)
        grid = np.linspace(0, horizon, bins)
        comm = np.isin(wl.task_type, [int(t) for t in PUT_TYPES])
        ax = axes[2 * i, 0]
        worst = int(res.rank_latency_us.argmax())
        for label, mask, colour in (("AIC busy", wl.unit == 0, "tab:blue"),
                                    ("AIV compute busy", (wl.unit == 1) & ~comm, "tab:orange"),
                                    ("AIV communication busy", (wl.unit == 1) & comm, "tab:green")):
            cores = pred.cfg.num_aic if colour == "tab:blue" else pred.cfg.num_aiv
            per_rank = [occupancy(res.start[mask & (wl.rank == r)], res.end[mask & (wl.rank == r)], grid) / cores
                        for r in range(wl.ep)]
            ax.plot(grid / 1e3, np.mean(per_rank, axis=0), color=colour, label=f"{label} (mean over ranks)")
            ax.plot(grid / 1e3, per_rank[worst], color=colour, ls="--", lw=0.7, alpha=0.7)
        link = [occupancy(np.array([b[0] for b in busy]), np.array([b[1] for b in busy]), grid).clip(0, 1)
                for busy in res.link_busy]
        ax.plot(grid / 1e3, np.mean(link, axis=0), color="tab:red", lw=0.8, label="link egress in use")
        ax.axvline(res.latency_us / 1e3, color="k", lw=0.8)
        ax.set_ylim(0, 1.05)
        ax.set_xlim(0, horizon / 1e3)
        ax.set_ylabel("fraction busy")
        ax.set_title(f"{d}: HP-MoE SSC path, PREDICTED {res.latency_us / 1e3:.2f} ms "
                     f"(dashed: slowest rank {worst}); {pred.hw.name} model, routing {pred.routing}")
        ax.legend(loc="lower right", fontsize=7)
        bx = axes[2 * i + 1, 0]
        if base is not None:
            for op in base.ops:
                s, du = float(op.start_us[worst]) / 1e3, float(op.duration_us[worst]) / 1e3
                bx.barh(0, du, left=s, color=KIND_COLOURS[op.kind], edgecolor="k", lw=0.4)
                if du > horizon / 1e3 * 0.04:
                    bx.text(s + du / 2, 0, op.name.replace(" AllToAllV", "\nA2AV"), ha="center", va="center",
                            fontsize=6)
            bx.set_title(f"{d}: kernel-by-kernel baseline, PREDICTED {base.latency_us / 1e3:.2f} ms "
                         f"(blue AIC, orange AIV, green collective)", fontsize=9)
        bx.set_xlim(0, horizon / 1e3)
        bx.set_yticks([])
        bx.set_xlabel("predicted time (ms)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
