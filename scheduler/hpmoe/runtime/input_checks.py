"""Checks of the numpy entry point's inputs (`hpmoe.runtime.run_moe`): every array's shape (rank stack
included), that ids are integers (a float id is refused, never truncated) and in range, and that values are
finite. Each failure is one InputError line naming the array and what was expected."""
from __future__ import annotations

import numpy as np

from ..config import MoeConfig
from ..errors import InputError


def expected_shapes(cfg: MoeConfig) -> dict[str, tuple[int, ...]]:
    ep, T, h, I, E, k = cfg.ep, cfg.tokens, cfg.hidden, cfg.inter, cfg.experts_per_rank, cfg.topk
    return {"x": (ep, T, h), "w1": (ep, E, h, 2 * I), "w2": (ep, E, I, h), "dy": (ep, T, h),
            "topk_ids": (ep, T, k), "topk_weights": (ep, T, k)}


def check_ids(name: str, ids: np.ndarray, num_experts: int) -> None:
    """Integer dtype (bool and floats refused: a float id would be truncated) and 0 <= id < num_experts."""
    if ids.dtype == np.bool_ or not np.issubdtype(ids.dtype, np.integer):
        raise InputError(f"{name} must hold integers, got dtype {ids.dtype}")
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= num_experts):
        raise InputError(f"{name} must lie in [0, {num_experts}), got values in [{int(ids.min())}, "
                         f"{int(ids.max())}]")


def check_moe_inputs(cfg: MoeConfig, arrays: dict[str, object]) -> dict[str, np.ndarray]:
    """Returns the arrays as numpy arrays (not converted) after checking them; raises InputError."""
    out = {}
    for name, shape in expected_shapes(cfg).items():
        value = np.asarray(arrays[name])
        if value.shape != shape:
            what = "[ep, ...] rank stack " if value.ndim == len(shape) else ""
            raise InputError(f"{name} must have shape {shape} ({what}ep={cfg.ep}), got {value.shape}")
        if name != "topk_ids":
            if not (np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer)) \
                    or value.dtype == np.bool_:
                raise InputError(f"{name} must hold real numbers, got dtype {value.dtype}")
            if not np.all(np.isfinite(value)):
                raise InputError(f"{name} holds a non-finite value")
        out[name] = value
    check_ids("topk_ids", out["topk_ids"], cfg.num_experts)
    return out
