"""Several HyperParallelMoEFFN layers share one runtime and heap (its saved state stashed per layer only
while another layer uses the heap); the stack's y and gradients match the same stack on the standard path."""
from __future__ import annotations

import numpy as np
import pytest

import mindspore as ms
from mindspore import Tensor, nn

from hpmoe.mindspore import HyperParallelMoEFFN
from hpmoe.mindspore import host_state, kernel_library
from hpmoe.mindspore.reference import StandardMoEFFN
from hpmoe.runtime.tolerances import TOLERANCE, relative_error

T, H, I, E, K, LAYERS = 37, 24, 16, 4, 2, 3


class StackLoss(nn.Cell):
    """sum(stack(x) * dy), the stack being x <- x + layer(x) for every layer."""

    def __init__(self, layers, ids, dy):
        super().__init__()
        self.layers = nn.CellList(layers)
        self.ids, self.dy = ids, dy

    def construct(self, x, w):
        for layer in self.layers:
            x = x + layer(x, self.ids, w)
        return (x * self.dy).sum()


def _run(make_layer, mode):
    ms.set_context(mode=mode, device_target="CPU")
    rng = np.random.default_rng(4)
    layers = [make_layer() for _ in range(LAYERS)]
    for layer in layers:
        layer.w1.set_data(Tensor((rng.standard_normal((E, H, 2 * I)) * H ** -0.5).astype(np.float32)))
        layer.w2.set_data(Tensor((rng.standard_normal((E, I, H)) * I ** -0.5).astype(np.float32)))
    ids = Tensor(np.stack([rng.permutation(E)[:K] for _ in range(T)]).astype(np.int32))
    x = Tensor(rng.standard_normal((T, H)).astype(np.float32))
    w = Tensor(rng.random((T, K)).astype(np.float32))
    dy = Tensor(rng.standard_normal((T, H)).astype(np.float32))
    net = StackLoss(layers, ids, dy)
    params = [p for layer in layers for p in (layer.w1, layer.w2)]
    out, (inputs_grad, weights_grad) = ms.value_and_grad(net, (0, 1), params)(x, w)
    return [t.asnumpy().astype(np.float64) for t in (out, *inputs_grad, *weights_grad)], layers


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_layers_share_one_heap_and_match_the_standard_path(mode):
    before = len(host_state.all_sessions())
    got, layers = _run(lambda: HyperParallelMoEFFN(H, I, E, K), mode)
    want, _ = _run(lambda: StandardMoEFFN(H, I, E, K), mode)
    for i, (g, w) in enumerate(zip(got, want)):
        assert relative_error(g, w) <= TOLERANCE["fp32"], f"output {i}: {relative_error(g, w):.2e}"
    sessions = host_state.all_sessions()
    assert len(sessions) - before <= 1, "layers of one shape must share one session"
    session = layers[0].state.session(T)
    assert session.retired == [] and session.active is not None
    # Layers 0 and 1 had to stash (a later layer's forward ran before their backward); the last did not.
    stashed = [kernel_library.stash_bytes(layer.state.context_id) for layer in layers]
    assert stashed[0] > 0 and stashed[1] > 0 and stashed[-1] == 0, stashed
