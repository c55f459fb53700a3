"""`MoEFFN`: the MoE-FFN (Dispatch -> GMM -> SwiGLU -> GMM -> Combine) as an nn.Module whose forward and
backward are each one persistent-kernel launch of the CUDA backend (torch.autograd.Function).

EP group: `group` (a torch.distributed process group; default the whole world when torch.distributed is
initialised, else a group of one). Each process is one rank on its current GPU (launch with torchrun); the
ranks' heaps are mapped into each other with CUDA IPC handles exchanged through torch.distributed, and
`topk_ids` hold global expert ids (expert e lives on rank e // num_local_experts). Every rank calls forward
and backward together with the same number of tokens.

Data path per call: inputs are copied into the group's heap slots (device to device), the routing plan is
built on the host from topk_ids (one device sync), the kernel runs, outputs are copied out. The heap keeps
what forward saves for backward (recv_x, H, A, returned Y), so backward must follow its own forward before
the next forward of the same module and shape; a mismatch is refused, never silently wrong.
Compiled SSCs and heaps are cached per (tokens, bucket) on the module.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from ..config import make_config
from ..cuda.group import CudaGroup
from ..errors import RoutingError
from ..runtime.routing import plan_rank
from ..ssc_format import Slot

DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}


class MoEFFN(torch.nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, num_local_experts: int, topk: int, *,
                 group=None, capacity_factor: float | None = None, dtype: torch.dtype = torch.bfloat16,
                 tile_m: int = 128, num_aic: int | None = None, num_aiv: int | None = None,
                 timeout_s: float = 60.0, device=None):
        super().__init__()
        distributed = dist.is_available() and dist.is_initialized()
        self.group = group if group is not None or not distributed else dist.group.WORLD
        self.ep = dist.get_world_size(self.group) if distributed else 1
        self.rank = dist.get_rank(self.group) if distributed else 0
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be torch.bfloat16 or torch.float16, got {dtype}")
        self.hidden, self.inter, self.experts, self.topk = hidden_size, intermediate_size, num_local_experts, topk
        self.capacity_factor, self.dtype, self.tile_m, self.timeout_s = capacity_factor, dtype, tile_m, timeout_s
        device = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        # Row pipelines: cube-queue blocks run each row tile's whole chain (GMMs and their vector steps); the
        # few vector-queue blocks run entry signals and their share of the dispatch puts and final reductions
        # (benchmarks/RESULTS.md: fastest of split, mixed and pipelines at EP 1 and 2); weight-gradient tiles
        # are claimed at run time (the claim pool: 11% faster fwd+bwd under skewed routing at EP 2).
        self.num_aiv = num_aiv if num_aiv is not None else 4
        self.num_aic = num_aic if num_aic is not None else sms - self.num_aiv
        self.w1 = torch.nn.Parameter(torch.randn(num_local_experts, hidden_size, 2 * intermediate_size,
                                                 device=device).mul_(hidden_size ** -0.5).to(dtype))
        self.w2 = torch.nn.Parameter(torch.randn(num_local_experts, intermediate_size, hidden_size,
                                                 device=device).mul_(intermediate_size ** -0.5).to(dtype))
        self._groups: dict[tuple[int, int], CudaGroup] = {}
        self._pending: dict[tuple[int, int], int] = {}  # forward generation whose saved state the heap holds
        self._generation = 0

    def forward(self, x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor) -> torch.Tensor:
        return MoeFfnFunction.apply(x, topk_weights, self.w1, self.w2, topk_ids, self)

    # ---- the cached EP group of one shape bucket ---------------------------------------------------
    def _config(self, tokens: int):
        return make_config(None, {"ep": self.ep, "tokens": tokens, "hidden": self.hidden, "inter": self.inter,
                                  "experts_per_rank": self.experts, "topk": self.topk, "dtype": DTYPES[self.dtype],
                                  "tile_m": self.tile_m, "num_aic": self.num_aic, "num_aiv": self.num_aiv,
                                  "capacity_factor": self.capacity_factor, "mixed_queues": True,
                                  "row_pipelines": True, "claim_pool": True})

    def _group(self, ids_np) -> tuple[CudaGroup, tuple[int, int]]:
        """The group of this call's shape bucket: C covers the largest rows any rank sends any rank (agreed
        across the EP group, so every rank compiles the same SSCs)."""
        cfg = self._config(ids_np.shape[1])
        sent = np.bincount((ids_np[0].astype(np.int64) // self.experts).ravel(), minlength=self.ep)
        rows = max(cfg.tile_m, -(-int(sent.max(initial=0)) // cfg.tile_m) * cfg.tile_m)  # this rank's sends
        need = torch.tensor([rows, ids_np.shape[1], -ids_np.shape[1]], device=self.w1.device)
        if self.ep > 1:
            dist.all_reduce(need, op=dist.ReduceOp.MAX, group=self.group)
        if int(need[1]) != -int(need[2]):
            raise ValueError("every rank of the EP group must pass the same number of tokens")
        cfg = cfg.replace(recv_rows_per_src=max(cfg.recv_rows_per_src, int(need[0])))
        key = (cfg.tokens, cfg.recv_rows_per_src)
        if key not in self._groups:
            if self.ep == 1:
                self._groups[key] = CudaGroup(cfg, [self.w1.device.index])
            else:
                self._groups[key] = CudaGroup(cfg, [self.w1.device.index], local_rank=self.rank,
                                              exchange=self._exchange)
                dist.barrier(group=self.group)  # every heap mapped before any rank launches
        return self._groups[key], key

    def _exchange(self, handle: bytes) -> list[bytes]:
        handles: list = [None] * self.ep
        dist.all_gather_object(handles, handle, group=self.group)
        return handles


def _copy_in(group: CudaGroup, rank: int, slot: Slot, t: torch.Tensor) -> None:
    t = t.contiguous()
    group.copy_in(rank, slot, t.data_ptr(), t.numel() * t.element_size())


def _copy_out(group: CudaGroup, rank: int, slot: Slot, t: torch.Tensor) -> torch.Tensor:
    group.copy_out(rank, slot, t.data_ptr(), t.numel() * t.element_size())
    return t


def check_local_routing(cfg, ids, weights) -> None:
    """This rank's part of check_routing: ids in range, weights finite, what it sends fits the bucket."""
    if ids.size and (ids.min() < 0 or ids.max() >= cfg.num_experts):
        raise RoutingError(f"topk_ids must lie in [0, {cfg.num_experts}), got [{ids.min()}, {ids.max()}]")
    if not np.all(np.isfinite(weights)):
        raise RoutingError("topk_weights holds a non-finite value")
    sent = np.bincount((ids.astype(np.int64) // cfg.experts_per_rank).ravel(), minlength=cfg.ep)
    if sent.max(initial=0) > cfg.recv_rows_per_src:
        raise RoutingError(f"this rank sends {sent.max()} rows to rank {int(np.argmax(sent))}; the bucket holds "
                           f"C={cfg.recv_rows_per_src}")


class MoeFfnFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, topk_weights, w1, w2, topk_ids, module: MoEFFN):
        if x.dtype != module.dtype or x.dim() != 2 or x.shape[1] != module.hidden:
            raise ValueError(f"x must be [tokens, {module.hidden}] {module.dtype}, got {list(x.shape)} {x.dtype}")
        ids_np = topk_ids.detach().to("cpu", torch.int32).numpy()[None]  # the host plan needs the routing
        weights = topk_weights.detach().to(torch.float32).contiguous()
        group, key = module._group(ids_np)
        check_local_routing(group.cfg, ids_np[0], weights.cpu().numpy())
        plan = plan_rank(group.cfg, ids_np[0])
        r = module.rank
        torch.cuda.current_stream().synchronize()  # the backend's copies and launches run on its own stream
        for slot, t in ((Slot.X, x.detach()), (Slot.W1, w1.detach()), (Slot.W2, w2.detach()),
                        (Slot.TOPK_WEIGHTS, weights)):
            _copy_in(group, r, slot, t)
        group.write(r, Slot.TOPK_IDS, ids_np[0])
        group.write(r, Slot.SEND_ROWS, plan.send_rows)
        group.write(r, Slot.SEND_COUNTS, plan.send_counts)
        group.write(r, Slot.TOKEN_ROWS, plan.token_rows)
        group.run("fwd", timeout_s=module.timeout_s)
        module._generation += 1
        module._pending[key] = module._generation
        ctx.module, ctx.key, ctx.generation = module, key, module._generation
        ctx.shapes = (x.shape, w1.shape, w2.shape, topk_weights.shape, topk_weights.dtype)
        return _copy_out(group, r, Slot.Y, torch.empty_like(x))

    @staticmethod
    def backward(ctx, dy):
        module, key = ctx.module, ctx.key
        if module._pending.get(key) != ctx.generation:
            raise RuntimeError("hpmoe MoEFFN: another forward of the same shape ran before this backward; its saved "
                               "activations were overwritten (run backward before the next forward)")
        group = module._groups[key]
        x_shape, w1_shape, w2_shape, tw_shape, tw_dtype = ctx.shapes
        torch.cuda.current_stream().synchronize()
        r = module.rank
        _copy_in(group, r, Slot.DY, dy.to(module.dtype))
        group.run("bwd", timeout_s=module.timeout_s)
        module._pending.pop(key, None)
        dev = dy.device
        dx = _copy_out(group, r, Slot.DX, torch.empty(x_shape, dtype=module.dtype, device=dev))
        dw1 = _copy_out(group, r, Slot.DW1, torch.empty(w1_shape, dtype=torch.float32, device=dev)).to(module.dtype)
        dw2 = _copy_out(group, r, Slot.DW2, torch.empty(w2_shape, dtype=torch.float32, device=dev)).to(module.dtype)
        dtw = _copy_out(group, r, Slot.DTOPK_WEIGHTS, torch.empty(tw_shape, dtype=torch.float32, device=dev)).to(tw_dtype)
        return dx, dtw, dw1, dw2, None, None
