"""Expert parallelism for a transformers model under torchrun: every rank keeps its own tokens (data
parallel) and 1/EP of every MoE layer's experts; router top-k ids stay global and moe_ffn dispatches each row to
the rank holding its expert (global expert e on EP rank e // E_local) and combines the results back.

Groups: the W = EP x R ranks form R EP groups of consecutive ranks ({0..EP-1}, {EP..2EP-1}, ...: one node's
NVLink domain when EP is at most the GPUs per node) and EP replica groups {r, r+EP, r+2EP, ...} holding the same
expert shard.

Gradients (each rank's loss is the mean over its own tokens):
- everything but the experts is replicated on all W ranks: average over all W (DDP with the expert
  parameters ignored, ExpertShards.param_names);
- an expert's gradient on its rank already sums the contributions of all EP ranks' tokens (the backward's
  combine brings their dy), so it is never all-reduced over the EP group; ExpertShards.reduce_grads() sums it
  over the R replicas and divides by W, which makes it the gradient of the mean loss over all ranks, the same
  normalisation DDP gives the rest (without the 1/EP the experts would learn EP x faster).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from .registration import NAME
from .variants import check_supported, is_experts_module

_groups: dict[int, tuple] = {}


def make_ep_groups(ep_size: int):
    """(this rank's EP group, its replica group or None), created once per ep_size on every rank (new_group is
    collective: all ranks call this together)."""
    world, rank = dist.get_world_size(), dist.get_rank()
    if ep_size < 1 or world % ep_size:
        raise ValueError(f"ep_size={ep_size} must divide the world size {world}")
    if ep_size not in _groups:
        mine, replica = dist.group.WORLD, None
        if ep_size < world:
            for start in range(0, world, ep_size):
                g = dist.new_group(list(range(start, start + ep_size)))
                mine = g if start <= rank < start + ep_size else mine
            for r in range(ep_size):
                g = dist.new_group(list(range(r, world, ep_size)))
                replica = g if rank % ep_size == r else replica
        _groups[ep_size] = (mine, replica)
    return _groups[ep_size]


@dataclass
class ExpertShards:
    group: object            # the EP group (moe_ffn's group)
    ep_size: int
    ep_rank: int
    replica_group: object    # ranks holding the same shard, or None
    replicas: int
    param_names: list[str] = field(default_factory=list)
    params: list[torch.nn.Parameter] = field(default_factory=list)

    def reduce_grads(self) -> None:
        """Call after backward, before the optimizer step (module docstring: why sum over replicas / W)."""
        scale = 1.0 / (self.ep_size * self.replicas)
        for p in self.params:
            if p.grad is None:
                continue
            if self.replica_group is not None:
                dist.all_reduce(p.grad, group=self.replica_group)
            p.grad.mul_(scale)


def shard_experts(model: torch.nn.Module, ep_size: int | None = None) -> ExpertShards:
    """Keep this rank's 1/ep_size of every experts module's experts (default ep_size: the world size).

    Call on every rank after the weights are the same everywhere (from_pretrained, or from_config under one
    seed) and before building the optimizer: the parameters are replaced by new ones holding the slice
    (experts [ep_rank * E / ep_size, (ep_rank + 1) * E / ep_size)). The experts' `num_experts` stays global,
    like the router's top-k ids."""
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("shard_experts needs torch.distributed initialised (run under torchrun)")
    ep_size = ep_size or dist.get_world_size()
    group, replica_group = make_ep_groups(ep_size)
    ep_rank = dist.get_rank(group)
    shards = ExpertShards(group, ep_size, ep_rank, replica_group, dist.get_world_size() // ep_size)
    for name, module in model.named_modules():
        if not is_experts_module(module):
            continue
        impl = getattr(getattr(module, "config", None), "_experts_implementation", None)
        if impl != NAME:
            raise ValueError(f"shard_experts: {name} ({type(module).__name__}) runs experts_implementation="
                             f"{impl!r}; sharded experts need experts_implementation=\"{NAME}\"")
        if "_hpmoe_shard" in module.__dict__:
            raise ValueError(f"shard_experts: {name} is already sharded")
        check_supported(module)
        experts = module.gate_up_proj.shape[0]
        if experts % ep_size:
            raise ValueError(f"shard_experts: {name} has {experts} experts, not divisible by ep_size={ep_size}")
        lo, hi = ep_rank * experts // ep_size, (ep_rank + 1) * experts // ep_size
        for pname in ("gate_up_proj", "down_proj"):
            old = getattr(module, pname)
            new = torch.nn.Parameter(old.detach()[lo:hi].clone(), requires_grad=old.requires_grad)
            setattr(module, pname, new)
            shards.params.append(new)
            shards.param_names.append(f"{name}.{pname}")
        module.__dict__["_hpmoe_shard"] = shards
        module.__dict__.pop("_hpmoe_runtime", None)
    if not shards.params:
        raise ValueError(f"shard_experts: {type(model).__name__} has no experts module")
    return shards
