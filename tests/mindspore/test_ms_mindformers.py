"""hpmoe.mindformers: FFNGroupedGEMM's weight layout and routing inputs mapped onto hpmoe. MindFormers itself
is not installed here (mindformers==2.0.0 requires hyper-parallel~=1.0.0, which is not on PyPI), so what runs
is the mapping on tensors laid out as FFNGroupedGEMM stores them, checked against float64 numpy that reads
those layouts independently (per expert slice of the stored weight rows), gradients into weight1/weight2
included. replace_ffn_grouped_gemm on a real FFNGroupedGEMM did not run here."""
from __future__ import annotations

import numpy as np
import pytest

import mindspore as ms
from mindspore import Parameter, Tensor

from hpmoe.mindformers import HyperParallelFFN, map_weights
from hpmoe.runtime.tolerances import TOLERANCE, relative_error

B, S, H, F, E, K = 3, 13, 24, 16, 4, 2


def _expert_ffn_float64(x, w1_stored, w2_stored, ids, coeff, dy):
    """y and grads from the stored layouts, expert by expert: expert e's W1 is rows e*h..(e+1)*h of the
    flat [E*h, 2F] weight1, gate columns first; W2 rows e*F..(e+1)*F of weight2 [E*F, h]."""
    x64 = x.reshape(-1, H).astype(np.float64)
    ids, coeff, dy = ids.reshape(-1, K), coeff.reshape(-1, K).astype(np.float64), dy.reshape(-1, H)
    w1f, w2f = w1_stored.reshape(E * H, 2 * F).astype(np.float64), w2_stored.reshape(E * F, H).astype(np.float64)
    y, dw1, dw2 = np.zeros_like(x64), np.zeros_like(w1f), np.zeros_like(w2f)
    for t in range(x64.shape[0]):
        for j in range(K):
            e = ids[t, j]
            W1, W2 = w1f[e * H:(e + 1) * H], w2f[e * F:(e + 1) * F]
            hh = x64[t] @ W1
            g, u = hh[:F], hh[F:]
            sig = 1 / (1 + np.exp(-g))
            a = g * sig * u
            y[t] += coeff[t, j] * (a @ W2)
            dyt = coeff[t, j] * dy[t]
            dw2[e * F:(e + 1) * F] += np.outer(a, dyt)
            da = W2 @ dyt
            dg = da * u * (sig * (1 + g * (1 - sig)))
            dw1[e * H:(e + 1) * H] += np.outer(x64[t], np.concatenate([dg, da * g * sig]))
    return y.reshape(B, S, H), dw1, dw2


def test_weight_layout_and_routing_map_onto_hpmoe():
    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    rng = np.random.default_rng(2)
    w1 = (rng.standard_normal((E * H, 2 * F)) * H ** -0.5).astype(np.float32)  # 2.0.0's stored shape
    w2 = (rng.standard_normal((E * F, H)) * F ** -0.5).astype(np.float32)
    x = rng.standard_normal((B, S, H)).astype(np.float32)
    ids = np.stack([rng.permutation(E)[:K] for _ in range(B * S)]).reshape(B, S, K).astype(np.int32)
    coeff = rng.random((B, S, K)).astype(np.float32)
    dy = rng.standard_normal((B, S, H)).astype(np.float32)
    weight1, weight2 = Parameter(Tensor(w1), name="weight1"), Parameter(Tensor(w2), name="weight2")
    ffn = HyperParallelFFN(weight1, weight2, E, H, F, K)

    def loss(t, c):
        return (ffn(t, c, Tensor(ids)) * Tensor(dy)).sum()

    y = ffn(Tensor(x), Tensor(coeff), Tensor(ids))
    _, (g1, g2) = ms.grad(loss, grad_position=(0, 1), weights=[weight1, weight2])(Tensor(x), Tensor(coeff))
    ref_y, ref_dw1, ref_dw2 = _expert_ffn_float64(x, w1, w2, ids, coeff, dy)
    assert y.shape == (B, S, H) and g1.shape == (E * H, 2 * F) and g2.shape == (E * F, H)
    for name, got, want in (("y", y, ref_y), ("d weight1", g1, ref_dw1), ("d weight2", g2, ref_dw2)):
        err = relative_error(got.asnumpy(), want)
        assert err <= TOLERANCE["fp32"], f"{name}: {err:.2e}"


def test_wrong_weight_sizes_are_refused():
    with pytest.raises(ValueError, match=r"weight1 has shape \(10, 32\): 320 elements, expected 3072"):
        map_weights(np.zeros((10, 32)), np.zeros((E * F, H)), E, H, F)

