"""Storage forms of the activation dtypes on the numpy side: fp32 -> float32, fp16 -> float16, bf16 -> uint16
bit patterns (numpy has no bfloat16). Rounding is round-to-nearest-even, the rule op_kernel/cpu/dtype.h uses.
"""
from __future__ import annotations

import numpy as np


def to_storage(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 (or float32) values -> the storage array of `dtype`, rounded to nearest even."""
    f32 = np.asarray(values, np.float32)
    if dtype == "fp32":
        return f32.copy()
    if dtype == "fp16":
        return f32.astype(np.float16)
    bits = f32.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(f32)
    out = rounded.astype(np.uint16)
    out[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return out


def to_float64(stored: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return (np.asarray(stored, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return np.asarray(stored).astype(np.float64)


def round_trip(values: np.ndarray, dtype: str) -> np.ndarray:
    """The float64 values a tensor holds after it is stored in `dtype`."""
    return to_float64(to_storage(values, dtype), dtype)
