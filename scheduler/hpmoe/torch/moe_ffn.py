"""`MoEFFN`: the MoE-FFN (Dispatch -> GMM -> SwiGLU -> GMM -> Combine) as an nn.Module whose forward and
backward are each one persistent-kernel launch of the CUDA backend (torch.autograd.Function).

Scope today: one rank per process on its current GPU (EP 1, or `group` of size 1). EP > 1 under torchrun
needs each process to map its peers' heaps (CUDA IPC handles exchanged through torch.distributed), which
the backend does not have yet; `hpmoe run --backend cuda --ep N` runs EP N from one process.

Data path per call: inputs are copied into the group's heap slots (device to device), the routing plan is
built on the host from topk_ids (one device sync), the kernel runs, outputs are copied out. The heap keeps
what forward saves for backward (recv_x, H, A, returned Y), so backward must follow its own forward before
the next forward of the same module and shape; a mismatch is refused, never silently wrong.
Compiled SSCs and heaps are cached per (tokens, bucket) on the module.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from ..config import make_config
from ..cuda.group import CudaGroup
from ..runtime.routing import bucket_for, check_routing, plan_rank
from ..ssc_format import Slot

DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}


class MoEFFN(torch.nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, num_local_experts: int, topk: int, *,
                 group=None, capacity_factor: float | None = None, dtype: torch.dtype = torch.bfloat16,
                 tile_m: int = 128, num_aic: int | None = None, num_aiv: int | None = None,
                 timeout_s: float = 60.0, device=None):
        super().__init__()
        world = dist.get_world_size(group) if dist.is_available() and dist.is_initialized() and group is not None else 1
        if world != 1:
            raise NotImplementedError(f"MoEFFN over an EP group of {world} processes needs the multi-process "
                                      "transport (CUDA IPC), which is not built yet; use an EP group of 1")
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be torch.bfloat16 or torch.float16, got {dtype}")
        self.hidden, self.inter, self.experts, self.topk = hidden_size, intermediate_size, num_local_experts, topk
        self.capacity_factor, self.dtype, self.tile_m, self.timeout_s = capacity_factor, dtype, tile_m, timeout_s
        device = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        # Cube-role blocks take most SMs: GMM tiles are the bulk of the work; vector blocks keep SwiGLU,
        # puts and reductions off the GEMMs' critical path.
        self.num_aiv = num_aiv if num_aiv is not None else max(4, sms // 7)
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
        return make_config(None, {"ep": 1, "tokens": tokens, "hidden": self.hidden, "inter": self.inter,
                                  "experts_per_rank": self.experts, "topk": self.topk, "dtype": DTYPES[self.dtype],
                                  "tile_m": self.tile_m, "num_aic": self.num_aic, "num_aiv": self.num_aiv,
                                  "capacity_factor": self.capacity_factor})

    def _group(self, ids_np) -> tuple[CudaGroup, tuple[int, int]]:
        cfg = self._config(ids_np.shape[1])
        cfg = cfg.replace(recv_rows_per_src=max(cfg.recv_rows_per_src, bucket_for(cfg, ids_np)))
        key = (cfg.tokens, cfg.recv_rows_per_src)
        if key not in self._groups:
            self._groups[key] = CudaGroup(cfg, [self.w1.device.index])
        return self._groups[key], key


def _copy_in(group: CudaGroup, slot: Slot, t: torch.Tensor) -> None:
    t = t.contiguous()
    group.copy_in(0, slot, t.data_ptr(), t.numel() * t.element_size())


def _copy_out(group: CudaGroup, slot: Slot, t: torch.Tensor) -> torch.Tensor:
    group.copy_out(0, slot, t.data_ptr(), t.numel() * t.element_size())
    return t


class MoeFfnFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, topk_weights, w1, w2, topk_ids, module: MoEFFN):
        if x.dtype != module.dtype or x.dim() != 2 or x.shape[1] != module.hidden:
            raise ValueError(f"x must be [tokens, {module.hidden}] {module.dtype}, got {list(x.shape)} {x.dtype}")
        ids_np = topk_ids.detach().to("cpu", torch.int32).numpy()[None]  # the host plan needs the routing
        weights = topk_weights.detach().to(torch.float32).contiguous()
        group, key = module._group(ids_np)
        check_routing(group.cfg, ids_np, weights.cpu().numpy()[None])
        plan = plan_rank(group.cfg, ids_np[0])
        torch.cuda.current_stream().synchronize()  # the backend's copies and launches run on its own stream
        for slot, t in ((Slot.X, x.detach()), (Slot.W1, w1.detach()), (Slot.W2, w2.detach()),
                        (Slot.TOPK_WEIGHTS, weights)):
            _copy_in(group, slot, t)
        group.write(0, Slot.TOPK_IDS, ids_np[0])
        group.write(0, Slot.SEND_ROWS, plan.send_rows)
        group.write(0, Slot.SEND_COUNTS, plan.send_counts)
        group.write(0, Slot.TOKEN_ROWS, plan.token_rows)
        group.run("fwd", timeout_s=module.timeout_s)
        module._generation += 1
        module._pending[key] = module._generation
        ctx.module, ctx.key, ctx.generation = module, key, module._generation
        ctx.shapes = (x.shape, w1.shape, w2.shape, topk_weights.shape, topk_weights.dtype)
        return _copy_out(group, Slot.Y, torch.empty_like(x))

    @staticmethod
    def backward(ctx, dy):
        module, key = ctx.module, ctx.key
        if module._pending.get(key) != ctx.generation:
            raise RuntimeError("hpmoe MoEFFN: another forward of the same shape ran before this backward; its saved "
                               "activations were overwritten (run backward before the next forward)")
        group = module._groups[key]
        x_shape, w1_shape, w2_shape, tw_shape, tw_dtype = ctx.shapes
        torch.cuda.current_stream().synchronize()
        _copy_in(group, Slot.DY, dy.to(module.dtype))
        group.run("bwd", timeout_s=module.timeout_s)
        module._pending.pop(key, None)
        dev = dy.device
        dx = _copy_out(group, Slot.DX, torch.empty(x_shape, dtype=module.dtype, device=dev))
        dw1 = _copy_out(group, Slot.DW1, torch.empty(w1_shape, dtype=torch.float32, device=dev)).to(module.dtype)
        dw2 = _copy_out(group, Slot.DW2, torch.empty(w2_shape, dtype=torch.float32, device=dev)).to(module.dtype)
        dtw = _copy_out(group, Slot.DTOPK_WEIGHTS, torch.empty(tw_shape, dtype=torch.float32, device=dev)).to(tw_dtype)
        return dx, dtw, dw1, dw2, None, None
