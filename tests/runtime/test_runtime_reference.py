"""The float64 reference itself: its gradients agree with central finite differences of the forward pass,
and zero-weight or unrouted paths contribute nothing."""
from __future__ import annotations

import numpy as np

from hpmoe.reference import moe_reference


def _tiny(seed=0, ep=2, T=3, h=5, inter=3, E=2, k=2):
    rng = np.random.default_rng(seed)
    ids = np.stack([np.stack([rng.choice(ep * E, k, replace=False) for _ in range(T)]) for _ in range(ep)])
    return dict(x=rng.standard_normal((ep, T, h)), w1=rng.standard_normal((ep, E, h, 2 * inter)) * 0.5,
                w2=rng.standard_normal((ep, E, inter, h)) * 0.5, topk_ids=ids,
                topk_weights=rng.random((ep, T, k)) + 0.1, dy=rng.standard_normal((ep, T, h)))


def _loss(args):  # L = <y, dy>: its gradients are exactly what backward returns
    return float(np.sum(moe_reference(**args)["y"] * args["dy"]))


def test_gradients_match_finite_differences():
    args = _tiny()
    out = moe_reference(**args)
    eps = 1e-6
    for name, grad in (("x", "dx"), ("w1", "dw1"), ("w2", "dw2"), ("topk_weights", "dtopk_weights")):
        base = args[name]
        numeric = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            plus, minus = base.copy(), base.copy()
            plus[idx] += eps
            minus[idx] -= eps
            numeric[idx] = (_loss({**args, name: plus}) - _loss({**args, name: minus})) / (2 * eps)
        np.testing.assert_allclose(out[grad], numeric, rtol=1e-5, atol=1e-6, err_msg=grad)


def test_unrouted_expert_has_zero_weight_gradient():
    args = _tiny(k=1)
    args["topk_ids"] = np.where(args["topk_ids"] == 3, 0, args["topk_ids"])  # expert 3 (rank 1, local 1) unused
    out = moe_reference(**args)
    assert not out["dw1"][1, 1].any() and not out["dw2"][1, 1].any()
    assert out["dw1"][0, 0].any() and out["dw2"][0, 0].any()  # expert 0 now takes those rows


def test_forward_matches_per_token_formula():
    args = _tiny(seed=3)
    y = moe_reference(**args)["y"]
    r, t = 1, 2
    want = np.zeros(5)
    for j, e in enumerate(args["topk_ids"][r, t]):
        H = args["x"][r, t] @ args["w1"][e // 2, e % 2]
        A = H[:3] / (1 + np.exp(-H[:3])) * H[3:]
        want += args["topk_weights"][r, t, j] * (A @ args["w2"][e // 2, e % 2])
    np.testing.assert_allclose(y[r, t], want, rtol=1e-12)
