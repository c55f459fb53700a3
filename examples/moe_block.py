"""A small MoE block for the training example: a trained router (linear, softmax, top-k), an MoE-FFN
(hpmoe's HyperParallelMoEFFN or the standard path), a residual, and a regression loss against a fixed
random teacher network, so the loss has somewhere to go."""
from __future__ import annotations

import numpy as np

import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops


class MoeBlock(nn.Cell):
    def __init__(self, ffn: nn.Cell, hidden: int, num_experts: int, topk: int):
        super().__init__()
        self.router = nn.Dense(hidden, num_experts, has_bias=False)
        self.ffn, self.topk = ffn, topk

    def construct(self, x):
        probs = ops.softmax(self.router(x), axis=-1)
        weights, ids = ops.topk(probs, self.topk)
        return x + self.ffn(x, ids.astype(ms.int32), weights)


class Loss(nn.Cell):
    def __init__(self, block: MoeBlock):
        super().__init__()
        self.block = block

    def construct(self, x, target):
        return ((self.block(x) - target) ** 2).mean()


def set_weights(block: MoeBlock, seed: int, rank: int, hidden: int, inter: int, experts: int, num_experts: int):
    """The same start for both implementations: router shared by all ranks, experts per rank."""
    rng = np.random.default_rng(seed)
    block.router.weight.set_data(Tensor((rng.standard_normal((num_experts, hidden)) * hidden ** -0.5)
                                        .astype(np.float32)))
    rng = np.random.default_rng(seed + 1000 + rank)
    block.ffn.w1.set_data(Tensor((rng.standard_normal((experts, hidden, 2 * inter)) * hidden ** -0.5)
                                 .astype(np.float32)))
    block.ffn.w2.set_data(Tensor((rng.standard_normal((experts, inter, hidden)) * inter ** -0.5)
                                 .astype(np.float32)))


class Teacher:
    """target = tanh(x A) B: fixed, shared by all ranks."""

    def __init__(self, hidden: int, seed: int):
        rng = np.random.default_rng(seed + 77)
        self.a = rng.standard_normal((hidden, 2 * hidden)) * hidden ** -0.5
        self.b = rng.standard_normal((2 * hidden, hidden)) * (2 * hidden) ** -0.5

    def batch(self, step: int, rank: int, tokens: int, hidden: int):
        rng = np.random.default_rng([step, rank, 12345])
        x = rng.standard_normal((tokens, hidden))
        return x.astype(np.float32), (np.tanh(x @ self.a) @ self.b).astype(np.float32)
