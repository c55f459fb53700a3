"""The PyTorch kernel-by-kernel MoE-FFN path that the CUDA backend is measured against (EP 1): gather by
expert, torch._grouped_mm, SwiGLU, torch._grouped_mm, scatter + weighted top-k sum; backward by autograd.
Imported only by the benchmarks (torch is optional)."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def moe_ffn_torch(x, w1, w2, topk_ids, topk_weights):
    """x [T, h], w1 [E, h, 2I], w2 [E, I, h], topk_ids [T, k] (local expert ids), topk_weights [T, k] fp32."""
    T, k = topk_ids.shape
    E, inter = w1.shape[0], w2.shape[1]
    flat = topk_ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    offs = torch.cumsum(torch.bincount(flat, minlength=E), 0).to(torch.int32)
    xs = x[order // k]
    h = torch._grouped_mm(xs, w1, offs=offs)
    a = F.silu(h[:, :inter]) * h[:, inter:]
    ye = torch._grouped_mm(a, w2, offs=offs)
    y_rows = torch.empty_like(ye).index_copy(0, order, ye).view(T, k, -1)
    return (y_rows.float() * topk_weights.unsqueeze(-1)).sum(1).to(x.dtype)
