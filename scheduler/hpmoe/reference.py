"""Plain float64 numpy reference of the MoE-FFN forward and backward, written from the math alone
(docs/design.md "Math"), independent of the scheduler, the SSC and the runtime: no slots, buckets or tiles.

Shapes (ep ranks, T tokens per rank, E local experts per rank, global expert e lives on rank e // E):
  x [ep, T, h], w1 [ep, E, h, 2I], w2 [ep, E, I, h], topk_ids [ep, T, k], topk_weights [ep, T, k], dy [ep, T, h].
"""
from __future__ import annotations

import numpy as np


def _silu(g: np.ndarray) -> np.ndarray:
    return g / (1 + np.exp(-g))


def moe_reference(x, w1, w2, topk_ids, topk_weights, dy, dtype=np.float64) -> dict[str, np.ndarray]:
    """Returns y, dx, dw1, dw2 and dtopk_weights in the input shapes, computed in `dtype` (float64: the
    reference; float32 only serves as a timing baseline in benchmarks/runtime_e2e.py)."""
    x, w1, w2, dy = (np.asarray(a, dtype) for a in (x, w1, w2, dy))
    weights = np.asarray(topk_weights, dtype)
    ep, T, h = x.shape
    E, inter = w1.shape[1], w2.shape[2]
    k = topk_ids.shape[-1]
    xs, dys = x.reshape(ep * T, h), dy.reshape(ep * T, h)
    ids, ws = np.asarray(topk_ids).reshape(ep * T, k), weights.reshape(ep * T, k)
    y, dx = np.zeros_like(xs), np.zeros_like(xs)
    dw1, dw2 = np.zeros_like(w1), np.zeros_like(w2)
    dtw = np.zeros_like(ws)
    for e in range(ep * E):
        tok, j = np.nonzero(ids == e)  # every (token, choice) routed to expert e
        if tok.size == 0:
            continue
        W1, W2 = w1[e // E, e % E], w2[e // E, e % E]
        X, w = xs[tok], ws[tok, j][:, None]
        H = X @ W1
        g, u = H[:, :inter], H[:, inter:]
        A = _silu(g) * u
        Y = A @ W2
        np.add.at(y, tok, w * Y)
        dY = w * dys[tok]
        dA = dY @ W2.T
        dw2[e // E, e % E] = A.T @ dY
        s = 1 / (1 + np.exp(-g))
        dH = np.concatenate([dA * u * s * (1 + g * (1 - s)), dA * g * s], axis=1)
        dw1[e // E, e % E] = X.T @ dH
        np.add.at(dx, tok, dH @ W1.T)
        dtw[tok, j] = np.einsum("nc,nc->n", Y, dys[tok])
    return {"y": y.reshape(ep, T, h), "dx": dx.reshape(ep, T, h), "dw1": dw1, "dw2": dw2,
            "dtopk_weights": dtw.reshape(ep, T, k)}
