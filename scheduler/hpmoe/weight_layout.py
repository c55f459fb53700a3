"""The two layouts expert weights are stored in (config weights_transposed), for the host side of a backend.

Standard: W1 [E, h, 2I] (gate | up along the last dim), W2 [E, I, h]: y = x W. nn.Linear / transformers:
W1 [E, 2I, h] (gate rows first), W2 [E, h, I]: y = x W^T. The kernels read either in place; dW1 and dW2
come out in the weights' layout. References, tests and `hpmoe run` hold the standard layout and convert at
the heap's edge with these two functions (a transpose of the last two dims either way).
"""
from __future__ import annotations

import numpy as np


def stored(w: np.ndarray, transposed: bool) -> np.ndarray:
    """A standard-layout weight (or batch of them, experts last-but-two) as the heap stores it."""
    return np.ascontiguousarray(np.swapaxes(w, -1, -2)) if transposed else w


def standard(w: np.ndarray, transposed: bool) -> np.ndarray:
    """A stored weight or weight gradient back in the standard layout."""
    return np.swapaxes(w, -1, -2) if transposed else w
