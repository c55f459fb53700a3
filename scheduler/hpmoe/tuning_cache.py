"""On-disk cache of measured CUDA schedules (`hpmoe tune --backend cuda` writes it, hpmoe.torch reads it).

Key: the GPU's name (as the CUDA driver reports it, e.g. "NVIDIA H200") and the shape, `shape_key(cfg)`:
"ep{ep}-t{tokens}-h{hidden}-i{inter}-e{experts_per_rank}-k{topk}-{dtype}-{w|wt}" ("wt": weights in
nn.Linear's layout). Everything else in a MoeConfig is the schedule, which is what the cache stores:
SCHEDULE_FIELDS of the fastest candidate, its measured fwd+bwd milliseconds and when it was measured.

File: $HPMOE_TUNING_CACHE, else ~/.cache/hpmoe/tuning.json; JSON {"version": 1, "entries": {gpu: {key:
entry}}}. Writes go to a temporary file renamed over the old one, so a reader never sees half a file; a
missing, unreadable or other-version file reads as empty (the caller falls back to the compiler's choice).
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from .config import MoeConfig

VERSION = 1
SCHEDULE_FIELDS = ("tile_m", "gmm_n_block", "act_n_block", "wgrad_n_block", "wgrad_tile", "token_tile", "num_aic",
                   "num_aiv", "mixed_queues", "row_pipelines", "claim_pool", "first_gmm_pool")


def cache_path() -> Path:
    return Path(os.environ.get("HPMOE_TUNING_CACHE") or Path.home() / ".cache" / "hpmoe" / "tuning.json")


def shape_key(cfg: MoeConfig) -> str:
    """The shape a schedule was measured for (see the module doc)."""
    return (f"ep{cfg.ep}-t{cfg.tokens}-h{cfg.hidden}-i{cfg.inter}-e{cfg.experts_per_rank}-k{cfg.topk}-{cfg.dtype}-"
            f"{'wt' if cfg.weights_transposed else 'w'}")


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"version": VERSION, "entries": {}}
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("entries"), dict):
        return {"version": VERSION, "entries": {}}
    return data


def lookup(shape: str, gpu_name: str, path: Path | None = None) -> dict[str, Any] | None:
    """The cached schedule fields for (shape key, GPU name), or None. Apply with cfg.replace(**fields)."""
    entry = _load(path or cache_path())["entries"].get(gpu_name, {}).get(shape)
    if not isinstance(entry, dict) or not isinstance(entry.get("schedule"), dict):
        return None
    return {k: v for k, v in entry["schedule"].items() if k in SCHEDULE_FIELDS}


def store(shape: str, gpu_name: str, cfg: MoeConfig, ms: float, path: Path | None = None) -> Path:
    """Record cfg's schedule fields as the winner for (shape key, GPU name); returns the file written."""
    path = path or cache_path()
    data = _load(path)
    data["entries"].setdefault(gpu_name, {})[shape] = {
        "schedule": {name: getattr(cfg, name) for name in SCHEDULE_FIELDS}, "fwd_bwd_ms": round(float(ms), 4),
        "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tuning-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
    return path
