"""How close the CPU twin must be to the float64 reference, per compute dtype, and why.

Metric: normwise max relative error, max|got - ref| / max|ref| over one output of all ranks. (Element-wise
relative error is meaningless for entries near zero, e.g. a token's dx that cancels.)

The inputs (x, weights, dy) are rounded to the compute dtype before both sides see them, so the only error
left is the runtime's own: fp32 accumulation, plus one rounding to the compute dtype each time an
intermediate is stored (H, A, Y, returned rows, w*dy, dA, dH, dX). The longest chain feeding an output
(dw1: w*dy -> dA -> dH, with H and A recomputed from stored values) stores at most 6 roundings; each costs at
most the unit roundoff u relative, so the tolerance is 10 u: the bound with headroom for the normalisation.
"""
from __future__ import annotations

import numpy as np

UNIT_ROUNDOFF = {"fp32": 2.0 ** -24, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}

TOLERANCE = {
    # fp32: no stored rounding matters; fp32 sums over K <= a few thousand terms grow like K*u in the worst
    # case (K=1024 -> 6e-5), so 1e-4 bounds them (observed: ~5e-7 on small).
    "fp32": 1e-4,
    # fp16: u = 4.9e-4; 10 u (observed on small: ~7e-4).
    "fp16": 10 * UNIT_ROUNDOFF["fp16"],
    # bf16: u = 3.9e-3 (8 mantissa bits); 10 u (observed on small: ~1e-2).
    "bf16": 10 * UNIT_ROUNDOFF["bf16"],
}


def relative_error(got: np.ndarray, ref: np.ndarray) -> float:
    scale = float(np.abs(ref).max(initial=0.0))
    diff = float(np.abs(np.asarray(got, np.float64) - ref).max(initial=0.0))
    if not np.all(np.isfinite(got)):
        return float("inf")
    return diff / scale if scale > 0 else diff


def compare(outputs: dict[str, np.ndarray], reference: dict[str, np.ndarray], dtype: str
            ) -> list[tuple[str, float, float, bool]]:
    """(name, error, tolerance, passed) per output, in the reference's order."""
    tol = TOLERANCE[dtype]
    rows = []
    for name, ref in reference.items():
        err = relative_error(outputs[name], ref)
        rows.append((name, err, tol, err <= tol))
    return rows
