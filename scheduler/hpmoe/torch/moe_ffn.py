"""The MoE-FFN (Dispatch -> GMM -> SwiGLU -> GMM -> Combine) for PyTorch: `moe_ffn(...)` on any weights, and
`MoEFFN`, an nn.Module holding its own. Forward and backward are each one persistent-kernel launch of the
CUDA backend (torch.autograd.Function), enqueued on PyTorch's current stream.

A call in a steady state does no host synchronisation and copies nothing: the routing plan is built on the
GPU from topk_ids (op_kernel/cuda/routing_plan.cuh), and x, topk_ids, the weights, y, dy, dx and the weight
gradients are used where PyTorch holds them (slots bound per launch, op_kernel/cuda/launch_binding.cuh).
Only what peers write (receive buffers, counters) and the expert-side intermediates live in hpmoe's heap.

Several forwards may be in flight before their backwards (pipeline schedules, gradient accumulation): each
forward leases one heap **generation** (a CudaGroup with its own heap and epochs) and holds it until its
autograd context is freed (after backward, or when the graph is dropped); generations are created on demand
and reused, so one in flight costs one heap, two cost two (`MoeFfnRuntime.heap_bytes()`).

EP group: `group` (a torch.distributed process group; default the whole world when torch.distributed is
initialised, else a group of one). Each process is one rank on its current GPU (torchrun); heaps are mapped
through CUDA IPC; `topk_ids` hold global expert ids (expert e lives on rank e // num_local_experts); every
rank calls forward and backward together with the same number of tokens. At EP 1 the bucket holds every
possible routing (C = T * k), so nothing is ever synchronised. At EP > 1 each forward agrees on the bucket
with one all_reduce of the device-computed row counts and reads it on the host (one sync per forward; see
docs/cuda.md, "The PyTorch op").

A launch that fails (a stuck wait, an expert id out of range) marks mapped host memory; the next call raises
a one-line error (`MoeFfnRuntime.check()` raises it at once, with a sync). A refused routing leaves NaN in y.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from ..config import make_config
from ..cuda.group import CudaGroup
from ..ssc_format import Slot

DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}


class _Lease:
    """One heap generation lent to one forward until its autograd context (or the call) lets go of it."""

    def __init__(self, pool: list, group: CudaGroup):
        self.pool, self.group = pool, group

    def release(self) -> None:
        if self.group is not None:
            self.pool.append(self.group)  # stream order makes reuse safe: later work runs after this call's
            self.group = None

    def __del__(self):
        self.release()


class MoeFfnRuntime:
    """The compiled schedules, heaps and launch state of one MoE-FFN shape on one EP group: share one per
    layer shape (layers of one shape may share it; each in-flight forward gets its own heap generation)."""

    def __init__(self, hidden_size: int, intermediate_size: int, num_local_experts: int, topk: int, *,
                 group=None, capacity_factor: float | None = None, dtype: torch.dtype = torch.bfloat16,
                 tile_m: int = 128, num_aic: int | None = None, num_aiv: int | None = None,
                 wgrad_tile: int = 0, token_tile: int = 0, timeout_s: float = 60.0, device=None):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be torch.bfloat16 or torch.float16, got {dtype}")
        distributed = dist.is_available() and dist.is_initialized()
        self.group = group if group is not None or not distributed else dist.group.WORLD
        self.ep = dist.get_world_size(self.group) if distributed else 1
        self.rank = dist.get_rank(self.group) if distributed else 0
        self.hidden, self.inter, self.experts, self.topk = hidden_size, intermediate_size, num_local_experts, topk
        self.capacity_factor, self.dtype, self.tile_m, self.timeout_s = capacity_factor, dtype, tile_m, timeout_s
        self.wgrad_tile, self.token_tile = wgrad_tile, token_tile  # 0: the compiler's choice
        self.device = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
        if self.device.type != "cuda":
            raise ValueError(f"hpmoe MoEFFN runs on a CUDA device, got device={self.device}")
        sms = torch.cuda.get_device_properties(self.device).multi_processor_count
        # Row pipelines: cube-queue blocks run each row tile's whole chain; 4 vector-queue blocks run entry
        # signals and their share of the puts and reductions; routing-dependent work is claimed at run time
        # (benchmarks/RESULTS.md: fastest of split, mixed and pipelines at EP 1, 2 and 4).
        self.num_aiv = num_aiv if num_aiv is not None else 4
        self.num_aic = num_aic if num_aic is not None else sms - self.num_aiv
        self._configs: dict = {}
        self._free: dict[tuple[int, int], list[CudaGroup]] = {}
        self._all: dict[tuple[int, int], list[CudaGroup]] = {}

    # ---- shape buckets and heap generations --------------------------------------------------------
    def config(self, tokens: int, rows_per_src: int | None = None):
        key = (tokens, rows_per_src)
        if key not in self._configs:  # make_config validates every field: once per shape, not per call
            self._configs[key] = self._make_config(tokens, rows_per_src)
        return self._configs[key]

    def _make_config(self, tokens: int, rows_per_src: int | None):
        cfg = make_config(None, {"ep": self.ep, "tokens": tokens, "hidden": self.hidden, "inter": self.inter,
                                 "experts_per_rank": self.experts, "topk": self.topk, "dtype": DTYPES[self.dtype],
                                 "tile_m": self.tile_m, "num_aic": self.num_aic, "num_aiv": self.num_aiv,
                                 "wgrad_tile": self.wgrad_tile, "token_tile": self.token_tile,
                                 "capacity_factor": self.capacity_factor, "mixed_queues": True,
                                 "row_pipelines": True, "claim_pool": True})
        if self.ep == 1:  # one rank receives everything: the bucket that holds any routing, no check needed
            rows_per_src = -(-tokens * self.topk // cfg.tile_m) * cfg.tile_m
        if rows_per_src is not None:
            cfg = cfg.replace(recv_rows_per_src=max(rows_per_src, cfg.tile_m if self.ep > 1 else 0))
        return cfg

    def _bucket(self, tokens: int, topk_ids: torch.Tensor) -> int:
        """C for this call. EP 1: fixed. EP > 1: the largest rows any rank sends any rank, agreed by an
        all_reduce of device-computed counts (one host read per forward) and rounded up to tile_m."""
        cfg = self.config(tokens)
        if self.ep == 1:
            return cfg.recv_rows_per_src
        sent = torch.bincount((topk_ids.reshape(-1).long() // self.experts).clamp_(0, self.ep - 1),
                              minlength=self.ep)
        need = torch.stack([sent.max(), torch.tensor(tokens, device=sent.device),
                            torch.tensor(-tokens, device=sent.device)])
        dist.all_reduce(need, op=dist.ReduceOp.MAX, group=self.group)
        rows, t_max, t_min = (int(v) for v in need.tolist())
        if t_max != -t_min:
            raise ValueError("every rank of the EP group must pass the same number of tokens")
        rows = -(-rows // cfg.tile_m) * cfg.tile_m
        # Keep a bucket once made unless the routing outgrows it (then grow by 1.25x at least).
        known = [c for (t, c) in self._all if t == tokens and c >= rows]
        if known:
            return min(known)
        grown = [c for (t, c) in self._all if t == tokens]
        return max([cfg.recv_rows_per_src, rows] + [-(-int(c * 1.25) // cfg.tile_m) * cfg.tile_m for c in grown
                                                    if int(c * 1.25) >= rows])

    def lease(self, tokens: int, topk_ids: torch.Tensor) -> _Lease:
        key = (tokens, self._bucket(tokens, topk_ids))
        free = self._free.setdefault(key, [])
        if not free:
            free.append(self._new_group(self.config(tokens, key[1])))
            self._all.setdefault(key, []).append(free[-1])
        return _Lease(free, free.pop())

    def _new_group(self, cfg) -> CudaGroup:
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        if self.ep == 1:
            return CudaGroup(cfg, [index])
        g = CudaGroup(cfg, [index], local_rank=self.rank, exchange=self._exchange)
        dist.barrier(group=self.group)  # every heap mapped before any rank launches
        return g

    def _exchange(self, handle: bytes) -> list[bytes]:
        handles: list = [None] * self.ep
        dist.all_gather_object(handles, handle, group=self.group)
        return handles

    def heap_bytes(self) -> int:
        """Device memory of every heap generation created so far."""
        from ..runtime.native import HeapLayout
        return sum(HeapLayout(g.cfg, g.counters["fwd"], g.counters["bwd"]).segment_bytes
                   for groups in self._all.values() for g in groups)

    def poll(self) -> None:
        """Raises the one-line report of a failed launch (reads mapped host memory: no sync unless one
        failed); the failed generation is dropped so the next call starts on a fresh heap."""
        for key, groups in self._all.items():
            for g in list(groups):
                try:
                    g.poll()
                except Exception:
                    groups.remove(g)
                    if g in self._free.get(key, []):
                        self._free[key].remove(g)
                    raise

    def check(self) -> None:
        """Waits for this device's work, then raises any failure (for tests and debugging)."""
        torch.cuda.synchronize(self.device)
        self.poll()


def _check_inputs(rt: MoeFfnRuntime, x, topk_ids, topk_weights, w1, w2) -> None:
    for name, t in (("x", x), ("topk_ids", topk_ids), ("topk_weights", topk_weights), ("w1", w1), ("w2", w2)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"hpmoe moe_ffn: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.device != rt.device:
            raise ValueError(f"hpmoe moe_ffn: {name} is on {t.device}, the op runs on {rt.device}")
    T, h, I, E, k = x.shape[0], rt.hidden, rt.inter, rt.experts, rt.topk
    expect = {"x": (x, (T, h)), "topk_ids": (topk_ids, (T, k)), "topk_weights": (topk_weights, (T, k)),
              "w1": (w1, (E, h, 2 * I)), "w2": (w2, (E, I, h))}
    for name, (t, shape) in expect.items():
        if tuple(t.shape) != shape:
            raise ValueError(f"hpmoe moe_ffn: {name} must have shape {list(shape)}, got {list(t.shape)}")
    if x.dtype != rt.dtype:
        raise ValueError(f"hpmoe moe_ffn: x is {x.dtype}, the op was built for {rt.dtype} (enable autocast to "
                         f"{rt.dtype} or convert x)")
    for name, t in (("w1", w1), ("w2", w2)):
        if t.dtype != rt.dtype:
            raise ValueError(f"hpmoe moe_ffn: {name} is {t.dtype}, the op was built for {rt.dtype}")
    if topk_ids.dtype not in (torch.int32, torch.int64) or not topk_weights.is_floating_point():
        raise ValueError(f"hpmoe moe_ffn: topk_ids must be int32/int64 and topk_weights floating point, got "
                         f"{topk_ids.dtype} and {topk_weights.dtype}")


def moe_ffn(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, w1: torch.Tensor,
            w2: torch.Tensor, runtime: MoeFfnRuntime) -> torch.Tensor:
    """y [T, h] = sum_j topk_weights[t, j] * (silu(x W1g[e]) * (x W1u[e])) W2[e], e = topk_ids[t, j].
    w1 [E_local, h, 2I] (gate | up) and w2 [E_local, I, h], contiguous or transpose views of the layouts
    transformers stores ([E, 2I, h] / [E, h, I]; read through a contiguous copy for now). Differentiable in
    x, topk_weights, w1 and w2. Under autocast a floating x is cast to the op's dtype, as autocast ops do."""
    if x.dtype != runtime.dtype and x.is_floating_point() and torch.is_autocast_enabled(x.device.type):
        x = x.to(runtime.dtype)
    _check_inputs(runtime, x, topk_ids, topk_weights, w1, w2)
    return MoeFfnFunction.apply(x, topk_weights, w1, w2, topk_ids, runtime)


class MoEFFN(torch.nn.Module):
    """The MoE-FFN with its own expert weights w1 [E_local, h, 2I] (gate | up) and w2 [E_local, I, h]."""

    def __init__(self, hidden_size: int, intermediate_size: int, num_local_experts: int, topk: int, *,
                 group=None, capacity_factor: float | None = None, dtype: torch.dtype = torch.bfloat16,
                 tile_m: int = 128, num_aic: int | None = None, num_aiv: int | None = None,
                 wgrad_tile: int = 0, token_tile: int = 0, timeout_s: float = 60.0, device=None):
        super().__init__()
        self.runtime = MoeFfnRuntime(hidden_size, intermediate_size, num_local_experts, topk, group=group,
                                     capacity_factor=capacity_factor, dtype=dtype, tile_m=tile_m, num_aic=num_aic,
                                     num_aiv=num_aiv, wgrad_tile=wgrad_tile, token_tile=token_tile,
                                     timeout_s=timeout_s, device=device)
        device = self.runtime.device
        self.w1 = torch.nn.Parameter(torch.randn(num_local_experts, hidden_size, 2 * intermediate_size,
                                                 device=device).mul_(hidden_size ** -0.5).to(dtype))
        self.w2 = torch.nn.Parameter(torch.randn(num_local_experts, intermediate_size, hidden_size,
                                                 device=device).mul_(intermediate_size ** -0.5).to(dtype))

    @property
    def ep(self) -> int:
        return self.runtime.ep

    @property
    def rank(self) -> int:
        return self.runtime.rank

    def forward(self, x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor) -> torch.Tensor:
        return moe_ffn(x, topk_ids, topk_weights, self.w1, self.w2, self.runtime)


def _stream(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream


class MoeFfnFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, topk_weights, w1, w2, topk_ids, rt: MoeFfnRuntime):
        rt.poll()
        T = x.shape[0]
        ctx.rt, ctx.tw_dtype, ctx.empty = rt, topk_weights.dtype, T == 0
        if T == 0:  # nothing to route; every rank of a group passes the same T, so no rank launches
            ctx.save_for_backward(w1, w2)
            return x.new_empty((0, rt.hidden))
        x = x.contiguous()
        ids = topk_ids.to(torch.int32).contiguous()
        weights = topk_weights.detach().to(torch.float32).contiguous()
        w1c, w2c = w1.detach().contiguous(), w2.detach().contiguous()  # transposed views: a copy (for now)
        lease = rt.lease(T, ids)
        y = torch.empty_like(x)
        lease.group.launch(rt.rank, "fwd", _stream(rt.device),
                           {Slot.X: x.data_ptr(), Slot.TOPK_IDS: ids.data_ptr(), Slot.TOPK_WEIGHTS: weights.data_ptr(),
                            Slot.W1: w1c.data_ptr(), Slot.W2: w2c.data_ptr(), Slot.Y: y.data_ptr()},
                           plan=True, timeout_s=rt.timeout_s)
        if any(ctx.needs_input_grad[:4]):
            ctx.lease = lease  # held until backward (or until the graph is dropped): backward reads the heap
        else:
            lease.release()
        ctx.save_for_backward(weights, w1c, w2c)
        return y

    @staticmethod
    def backward(ctx, dy):
        rt: MoeFfnRuntime = ctx.rt
        if ctx.empty:
            w1, w2 = ctx.saved_tensors
            return (dy.new_empty((0, rt.hidden)), dy.new_empty((0, rt.topk), dtype=ctx.tw_dtype),
                    torch.zeros_like(w1), torch.zeros_like(w2), None, None)
        rt.poll()
        weights, w1c, w2c = ctx.saved_tensors
        lease: _Lease = ctx.lease
        if lease.group is None:
            raise RuntimeError("hpmoe moe_ffn: a second backward through one forward (retain_graph) is not "
                               "supported: the first backward released the forward's saved state")
        dy = dy.to(rt.dtype).contiguous()
        T = dy.shape[0]
        dx = torch.empty_like(dy)
        dw1 = torch.empty_like(w1c)
        dw2 = torch.empty_like(w2c)
        dtw = torch.empty((T, rt.topk), dtype=torch.float32, device=dy.device)
        lease.group.launch(rt.rank, "bwd", _stream(rt.device),
                           {Slot.DY: dy.data_ptr(), Slot.TOPK_WEIGHTS: weights.data_ptr(), Slot.W1: w1c.data_ptr(),
                            Slot.W2: w2c.data_ptr(), Slot.DX: dx.data_ptr(), Slot.DW1: dw1.data_ptr(),
                            Slot.DW2: dw2.data_ptr(), Slot.DTOPK_WEIGHTS: dtw.data_ptr()},
                           dw_half=True, timeout_s=rt.timeout_s)
        lease.release()  # the next forward may reuse this heap: it runs after this backward on the stream
        return dx, dtw.to(ctx.tw_dtype), dw1, dw2, None, None
