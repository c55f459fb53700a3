"""The PyTorch expert-parallel MoE-FFN path (one process per GPU, torchrun): NCCL all_to_all_single for
Dispatch and Combine (host-synchronised splits), torch._grouped_mm for the two GEMMs, SwiGLU, permutes,
autograd for backward. DeepSeek-V3 expert shapes, the same routing generator and seed as hpmoe's benchmark.

    torchrun --nproc_per_node 4 benchmarks/cuda_ep_torch.py --tokens 4096 8192 --routing balanced skewed
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dnn
import torch.nn.functional as F

from hpmoe.config import make_config
from hpmoe.runtime.routing import make_routing


def moe_ep(x, w1, w2, ids, weights, ep: int, E: int):
    """x [T, h]; ids [T, k] global expert ids; w1/w2 this rank's E local experts."""
    T, k = ids.shape
    inter = w2.shape[1]
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)  # by destination rank, then local expert
    counts = torch.bincount(flat, minlength=ep * E).view(ep, E)
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts)
    send_splits = counts.sum(1).tolist()
    recv_splits = recv_counts.sum(1).tolist()
    xs = x[order // k]
    recv = dnn.all_to_all_single(xs.new_empty(sum(recv_splits), x.shape[1]), xs, recv_splits, send_splits)
    # Received rows are (source, local expert) ordered; group them by expert for the grouped GEMM.
    src_expert = torch.repeat_interleave(torch.arange(ep * E, device=x.device) % E, recv_counts.reshape(-1))
    perm = torch.argsort(src_expert, stable=True)
    offs = torch.cumsum(recv_counts.sum(0), 0).to(torch.int32)
    h = torch._grouped_mm(recv[perm], w1, offs=offs)
    a = F.silu(h[:, :inter]) * h[:, inter:]
    ye = torch._grouped_mm(a, w2, offs=offs)
    back_rows = torch.empty_like(ye).index_copy(0, perm, ye)
    back = dnn.all_to_all_single(back_rows.new_empty(T * k, x.shape[1]), back_rows, send_splits, recv_splits)
    y_rows = torch.empty_like(back).index_copy(0, order, back).view(T, k, -1)
    return (y_rows.float() * weights.unsqueeze(-1)).sum(1).to(x.dtype)


def slowest(ms: float) -> float:
    """The largest of every rank's `ms`."""
    t = torch.tensor([ms], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def timed_call(fn) -> float:
    """One call with CUDA events around it, every rank idle before it; the slowest rank's ms."""
    dist.barrier()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    torch.cuda.synchronize()
    return slowest(s.elapsed_time(e))


def timed(fn, repeat: int) -> float:
    fn()
    return statistics.median(timed_call(fn) for _ in range(repeat))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, nargs="+", default=[4096])
    p.add_argument("--routing", nargs="+", default=["balanced"])
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    dist.init_process_group("nccl")
    rank, ep = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    for tokens in args.tokens:
        for routing in args.routing:
            cfg = make_config("deepseek-v3", {"ep": ep, "tokens": tokens})
            ids, weights = make_routing(cfg, routing, 0)
            h, inter, E = cfg.hidden, cfg.inter, cfg.experts_per_rank
            g = torch.Generator(device="cuda").manual_seed(rank)
            x = torch.randn(tokens, h, device="cuda", generator=g).bfloat16().requires_grad_()
            w1 = (torch.randn(E, h, 2 * inter, device="cuda", generator=g) * h ** -0.5).bfloat16().requires_grad_()
            w2 = (torch.randn(E, inter, h, device="cuda", generator=g) * inter ** -0.5).bfloat16().requires_grad_()
            dy = torch.randn(tokens, h, device="cuda", generator=g).bfloat16()
            tid = torch.from_numpy(ids[rank].astype("int64")).cuda()
            tw = torch.from_numpy(weights[rank]).cuda()
            fwd = timed(lambda: moe_ep(x, w1, w2, tid, tw, ep, E), args.repeat)
            fb = timed(lambda: moe_ep(x, w1, w2, tid, tw, ep, E).backward(dy), args.repeat)
            if rank == 0:
                print(json.dumps({"path": "torch", "ep": ep, "tokens": tokens, "routing": routing,
                                  "fwd_ms": fwd, "fwdbwd_ms": fb}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
