"""Cases shared by the in-process tests and the msrun worker: the whole group's inputs from one seed (every
rank builds the same arrays and takes its own slice), hpmoe and the standard path through ms.grad, and the
comparisons. Tolerances: hpmoe.runtime.tolerances (normwise relative error against float64; fp32 1e-4 for fp32
sums, fp16/bf16 10 unit roundoffs for at most 6 stored roundings, plus the one rounding of dw1/dw2/d weights to
the parameter dtype when MindSpore receives them, which 10 u still covers)."""
from __future__ import annotations

import numpy as np

import mindspore as ms
from mindspore import Tensor

from hpmoe.config import make_config
from hpmoe.reference import moe_reference
from hpmoe.runtime.dtypes import round_trip
from hpmoe.runtime.routing import make_routing
from hpmoe.runtime.tolerances import TOLERANCE, relative_error

MS_DTYPES = {"fp32": ms.float32, "fp16": ms.float16, "bf16": ms.bfloat16}
OUTPUTS = ("y", "dx", "dtopk_weights", "dw1", "dw2")


def group_inputs(ep, tokens, hidden, inter, experts, topk, routing, dtype, seed):
    """[ep, ...] stacks of float64 values already representable in dtype (ids int32, weights float32)."""
    cfg = make_config(None, dict(ep=ep, tokens=tokens, hidden=hidden, inter=inter, experts_per_rank=experts,
                                 topk=topk, tile_m=16, dtype=dtype))
    ids, weights = make_routing(cfg, routing, seed)
    rng = np.random.default_rng(seed + 101)
    x = round_trip(rng.standard_normal((ep, tokens, hidden)), dtype)
    w1 = round_trip(rng.standard_normal((ep, experts, hidden, 2 * inter)) * hidden ** -0.5, dtype)
    w2 = round_trip(rng.standard_normal((ep, experts, inter, hidden)) * inter ** -0.5, dtype)
    dy = round_trip(rng.standard_normal((ep, tokens, hidden)), dtype)
    weights = round_trip(weights, dtype).astype(np.float32)
    return dict(x=x, w1=w1, w2=w2, dy=dy, topk_ids=ids, topk_weights=weights)


def tensor(a, dtype):
    return Tensor(np.asarray(a, np.float32)).astype(MS_DTYPES[dtype])


def run_cell(cell, inputs, rank, dtype, weights_from_cell=True):
    """y and the four gradients of loss = sum(y * dy) (loss in float32) as float64 numpy."""
    if weights_from_cell:
        cell.w1.set_data(tensor(inputs["w1"][rank], dtype))
        cell.w2.set_data(tensor(inputs["w2"][rank], dtype))
    x, w = tensor(inputs["x"][rank], dtype), tensor(inputs["topk_weights"][rank], dtype)
    ids, dy = Tensor(inputs["topk_ids"][rank]), Tensor(inputs["dy"][rank].astype(np.float32))

    def loss(x_, w_):
        return (cell(x_, ids, w_).astype(ms.float32) * dy).sum()

    y = cell(x, ids, w)
    (dx, dw), (dw1, dw2) = ms.grad(loss, grad_position=(0, 1), weights=[cell.w1, cell.w2])(x, w)
    as64 = lambda t: t.astype(ms.float32).asnumpy().astype(np.float64)  # noqa: E731
    return dict(y=as64(y), dx=as64(dx), dtopk_weights=as64(dw), dw1=as64(dw1), dw2=as64(dw2))


def run_standard(ref, inputs, rank, dtype):
    """The standard path (ReferenceMoEFFN, float32 compute) on the same rounded inputs."""
    x, w = tensor(inputs["x"][rank], dtype), tensor(inputs["topk_weights"][rank], dtype)
    w1, w2 = tensor(inputs["w1"][rank], dtype), tensor(inputs["w2"][rank], dtype)
    ids, dy = Tensor(inputs["topk_ids"][rank]), Tensor(inputs["dy"][rank].astype(np.float32))

    def loss(x_, w_, a, b):
        return (ref(x_, ids, w_, a, b).astype(ms.float32) * dy).sum()

    y = ref(x, ids, w, w1, w2)
    dx, dw, dw1, dw2 = ms.grad(loss, grad_position=(0, 1, 2, 3))(x, w, w1, w2)
    as64 = lambda t: t.astype(ms.float32).asnumpy().astype(np.float64)  # noqa: E731
    return dict(y=as64(y), dx=as64(dx), dtopk_weights=as64(dw), dw1=as64(dw1), dw2=as64(dw2))


def float64_reference(inputs, rank):
    r = moe_reference(inputs["x"], inputs["w1"], inputs["w2"], inputs["topk_ids"], inputs["topk_weights"],
                      inputs["dy"])
    return {n: r[n][rank] for n in OUTPUTS}


def errors(got, ref, dtype):
    """{name: (error, tolerance)}."""
    return {n: (relative_error(got[n], ref[n]), TOLERANCE[dtype]) for n in OUTPUTS}
