"""Train the MoE block of moe_block.py on every msrun rank, with hpmoe's HyperParallelMoEFFN and with the
standard MindSpore path, from the same seed, one after the other in one launch (GRAPH mode, AdamW).
Each rank writes <out>/rank<r>.json with both loss curves and step times; examples/train_compare.py launches
it and compares. Run alone (no msrun): EP 1."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import mindspore as ms
from mindspore import Tensor, nn

sys.path.insert(0, str(Path(__file__).parent))
from moe_block import Loss, MoeBlock, Teacher, set_weights  # noqa: E402


def train(impl: str, args, ep: int, rank: int, group) -> dict:
    from hpmoe.mindspore import HyperParallelMoEFFN
    from hpmoe.mindspore.reference import StandardMoEFFN

    h, inter, e, k = args.hidden, args.inter, args.experts, args.topk
    if impl == "hpmoe":
        ffn = HyperParallelMoEFFN(h, inter, e, k, group=group)
    else:
        ffn = StandardMoEFFN(h, inter, e, k, ep=ep, rank=rank, group=group)
    block = MoeBlock(ffn, h, ep * e, k)
    set_weights(block, args.seed, rank, h, inter, e, ep * e)
    loss_net = Loss(block)
    opt = nn.AdamWeightDecay(block.trainable_params(), learning_rate=args.lr, weight_decay=0.01)
    grad_fn = ms.value_and_grad(loss_net, None, opt.parameters)

    @ms.jit
    def step(x, target):
        loss, grads = grad_fn(x, target)
        opt(grads)
        return loss

    teacher = Teacher(h, args.seed)
    losses, times = [], []
    for i in range(args.steps):
        x, target = teacher.batch(i, rank, args.tokens, h)
        t0 = time.perf_counter()
        loss = float(step(Tensor(x), Tensor(target)).asnumpy())
        times.append(time.perf_counter() - t0)
        losses.append(loss)
    return {"loss": losses, "step_s": times}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--inter", type=int, default=64)
    p.add_argument("--experts", type=int, default=2, help="experts per rank")
    p.add_argument("--topk", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    from mindspore.communication import management as comm

    group = None
    if "MS_WORKER_NUM" in os.environ:  # launched by msrun
        comm.init()
        group = comm.GlobalComm.WORLD_COMM_GROUP
    ep = comm.get_group_size(group) if group else 1
    rank = comm.get_rank(group) if group else 0
    result = {"ep": ep, "rank": rank, "args": vars(args)}
    for impl in ("hpmoe", "standard"):
        result[impl] = train(impl, args, ep, rank, group)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, f"rank{rank}.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
