"""The "hpmoe" experts function transformers calls as `f(self, hidden_states, top_k_index, top_k_weights)`
in place of the experts module's own forward: one `hpmoe.torch.moe_ffn` call on the module's parameters.

Weights: views in the layout the model stores them (variants.expert_weights), never copied here; whatever
layout work remains is moe_ffn's (it reads transposed views in place where its kernel supports that, else it
makes one contiguous copy of w1 and w2 per call: 2 x the layer's expert bytes read and written per step).
Dtype: the kernels run bf16 or fp16. A model stored in fp32 runs under torch.autocast: x, w1 and w2 are cast
to the autocast dtype for the call (a weight copy per call; autograd takes the gradients back to the fp32
parameters), and the output returns in hidden_states' dtype, as transformers' grouped_mm does.
"""
from __future__ import annotations

import types

import torch
import torch.distributed as dist

from .variants import check_supported, expert_weights

_ops_override: types.ModuleType | None = None
_solo_group = None


def set_ops(ops: types.ModuleType | None) -> None:
    """Route every hpmoe experts call through `ops` (a module with `moe_ffn`, `MoeFfnRuntime`, `DTYPES`), e.g.
    hpmoe.transformers._reference on a CPU; None restores hpmoe.torch."""
    global _ops_override
    _ops_override = ops


def _ops():
    if _ops_override is not None:
        return _ops_override
    import hpmoe.torch as ops  # the CUDA kernels; imported at the first call, not at registration
    if not callable(getattr(ops, "moe_ffn", None)) or not hasattr(ops, "MoeFfnRuntime"):  # a module is not callable
        raise RuntimeError("hpmoe.torch in this build has no moe_ffn/MoeFfnRuntime (needed by "
                           "experts_implementation=\"hpmoe\")")
    return ops


def _compute_dtype(ops, hidden_states: torch.Tensor, w1: torch.Tensor) -> torch.dtype:
    device_type = hidden_states.device.type
    dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else w1.dtype
    allowed = getattr(ops, "DTYPES", (torch.bfloat16, torch.float16))
    if dtype not in allowed:
        raise TypeError(f"experts_implementation=\"hpmoe\" runs in {', '.join(map(str, allowed))}; the experts "
                        f"weights are {w1.dtype} with no autocast: build the model with dtype=torch.bfloat16 or "
                        f"run it under torch.autocast(\"cuda\", dtype=torch.bfloat16)")
    return dtype


def _ep_group(module: torch.nn.Module):
    """The EP group of the module's experts: the one shard_experts recorded, else a group of this rank alone
    (moe_ffn's default group would be the whole world, which holds a shard, not every expert)."""
    global _solo_group
    shard = module.__dict__.get("_hpmoe_shard")
    if shard is not None:
        return shard.group
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return None
    if _solo_group is None:  # collective: every rank reaches its first unsharded experts call together
        _solo_group, _ = dist.new_subgroups(group_size=1)
    return _solo_group


def _runtime(module: torch.nn.Module, ops, x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, topk: int):
    """One MoeFfnRuntime per experts module, kept in its __dict__ (not a submodule: no state_dict entry, no
    .to()); rebuilt only if the call's shape, dtype, device or group changes."""
    group = _ep_group(module)
    key = (x.shape[1], w2.shape[1], w1.shape[0], topk, x.dtype, x.device, id(group))
    cached = module.__dict__.get("_hpmoe_runtime")
    if cached is None or cached[0] != key:
        rt = ops.MoeFfnRuntime(x.shape[1], w2.shape[1], w1.shape[0], topk, group=group, dtype=x.dtype,
                               device=x.device)
        module.__dict__["_hpmoe_runtime"] = cached = (key, rt)
    return cached[1]


def runtimes(model: torch.nn.Module) -> list:
    """The MoeFfnRuntime of every experts module of `model` that has run, in module order (e.g. for
    `bucket_stats()` or `heap_bytes()`); empty before the first forward."""
    return [m.__dict__["_hpmoe_runtime"][1] for m in model.modules() if "_hpmoe_runtime" in m.__dict__]


def hpmoe_experts_forward(self: torch.nn.Module, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                          top_k_weights: torch.Tensor) -> torch.Tensor:
    if not self.__dict__.get("_hpmoe_checked"):  # also checked at model build; this covers modules built alone
        check_supported(self)
        self.__dict__["_hpmoe_checked"] = True
    ops = _ops()
    w1, w2 = expert_weights(self)
    dtype = _compute_dtype(ops, hidden_states, w1)
    x, w1, w2 = hidden_states.to(dtype), w1.to(dtype), w2.to(dtype)
    rt = _runtime(self, ops, x, w1, w2, top_k_index.shape[-1])
    return ops.moe_ffn(x, top_k_index, top_k_weights, w1, w2, rt).to(hidden_states.dtype)
