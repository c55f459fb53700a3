"""hpmoe.mindformers: run MindFormers' DeepSeek-V3 MoE FFN (`FFNGroupedGEMM`, parallel_core/training_graph/
transformer/moe/ffn.py) through hpmoe instead of its Morph-wrapped dispatch -> GroupedMatmul -> Swiglu ->
GroupedMatmul -> combine.

The switch: `replace_ffn_grouped_gemm(model)` swaps every FFNGroupedGEMM cell of `model` for a
`HyperParallelFFN` that keeps the original Parameters (`weight1`, `weight2`: checkpoints and optimizers see
the same objects) and its call `(tokens [B, S, h], router_coeff/probs [B, S, k], expert_index/routing_map
[B, S, k])`. Weight layout: FFNGroupedGEMM reshapes weight1 (stored [E*h, 2F] in 2.0.0, [h, E*2F] later)
to [E, h, 2F] and weight2 ([E*F, h]) to [E, F, h] without transposing, so the same row-major reshape gives
hpmoe's w1 (gate | up: Swiglu on the last axis, silu of the first half times the second) and w2.
Routing: the k expert ids and coefficients of each token, global expert ids, as hpmoe takes them.
"""
from __future__ import annotations

import numpy as np

from mindspore import nn
from mindspore.common import dtype as mstype

from hpmoe.mindspore.moe_ffn import make_core

FFN_CLASS_PATH = "mindformers.parallel_core.training_graph.transformer.moe.ffn"


def map_weights(weight1, weight2, num_local_experts: int, hidden: int, ffn_hidden: int):
    """FFNGroupedGEMM's (weight1, weight2), any of their stored shapes, -> hpmoe's (w1 [E, h, 2F],
    w2 [E, F, h]): a row-major reshape (what FFNGroupedGEMM.construct itself does)."""
    e, h, f = num_local_experts, hidden, ffn_hidden
    for name, w, n in (("weight1", weight1, e * h * 2 * f), ("weight2", weight2, e * f * h)):
        if int(np.prod(w.shape)) != n:
            raise ValueError(f"{name} has shape {tuple(w.shape)}: {int(np.prod(w.shape))} elements, expected "
                             f"{n} for {e} local experts, hidden {h}, ffn hidden {f}")
    return weight1.reshape((e, h, 2 * f)), weight2.reshape((e, f, h))


def map_routing(expert_index, router_coeff):
    """[B, S, k] (or [T, k]) ids and coefficients -> topk_ids int32 [B*S, k], topk_weights [B*S, k]."""
    k = expert_index.shape[-1]
    return expert_index.reshape((-1, k)).astype(mstype.int32), router_coeff.reshape((-1, k))


class HyperParallelFFN(nn.Cell):
    """FFNGroupedGEMM's interface on hpmoe: construct(tokens, router_coeff, expert_index) -> [B, S, h]."""

    def __init__(self, weight1, weight2, num_local_experts, hidden_size, ffn_hidden_size, topk, *,
                 dtype=mstype.float32, capacity_factor=None, ssc_dir=None, group=None, tokens=None):
        super().__init__()
        self.weight1, self.weight2 = weight1, weight2
        self.num_local_experts, self.hidden_size, self.ffn_hidden_size = num_local_experts, hidden_size, \
            ffn_hidden_size
        map_weights(weight1, weight2, num_local_experts, hidden_size, ffn_hidden_size)  # shape check now
        self.dtype = dtype
        self.state, self.moe = make_core(hidden_size, ffn_hidden_size, num_local_experts, topk, dtype,
                                         capacity_factor, ssc_dir, group, tokens)

    def construct(self, tokens, router_coeff, expert_index):
        shape = tokens.shape
        w1, w2 = map_weights(self.weight1.astype(self.dtype), self.weight2.astype(self.dtype),
                             self.num_local_experts, self.hidden_size, self.ffn_hidden_size)
        ids, weights = map_routing(expert_index, router_coeff)
        y = self.moe(tokens.reshape((-1, self.hidden_size)).astype(self.dtype), ids, weights, w1, w2)
        return y.reshape(shape).astype(tokens.dtype)


def replace_ffn_grouped_gemm(model: nn.Cell, topk: int, **kwargs) -> int:
    """Swap every FFNGroupedGEMM in `model` for a HyperParallelFFN on the same Parameters; returns how many.
    Needs MindFormers importable; kwargs go to HyperParallelFFN (dtype, capacity_factor, ssc_dir, group; tokens on the NPU route)."""
    import importlib

    ffn_cls = importlib.import_module(FFN_CLASS_PATH).FFNGroupedGEMM
    swapped = 0
    for name, cell in list(model.cells_and_names()):
        for child_name, child in list(cell.name_cells().items()):
            if isinstance(child, ffn_cls):
                new = HyperParallelFFN(child.weight1, child.weight2, child.num_local_experts, child.hidden_size,
                                       child.intermediate_size, topk, **kwargs)
                setattr(cell, child_name, new)
                swapped += 1
    return swapped


__all__ = ["HyperParallelFFN", "map_routing", "map_weights", "replace_ffn_grouped_gemm"]
