"""One rank of the expert-parallel check (run by torchrun from test_hf_ep.py; CPU, gloo, moe_ffn's stand-in):
every rank builds the same model, keeps 1/EP of the experts (shard_experts), wraps the rest in DDP, runs its own
batch forward and backward and reduces the expert gradients (ExpertShards.reduce_grads). The reference is the
whole unsharded model in this one process, loss = mean over all ranks' batches: every gradient must match
(dense ones after DDP's average, expert ones as this rank's slice), and so must the loss after one SGD step.

Usage: torchrun --nproc_per_node W ep_worker.py ARCH EP_SIZE [cuda]   (EP_SIZE 0: no shard_experts, plain DDP
of the whole model, each rank's moe_ffn on a group of its own; cuda: one GPU per rank, NCCL, bf16, the real
kernels, one MoE layer so that both sides route identically)
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, str(Path(__file__).parent))
import hpmoe.transformers as ht  # noqa: E402
from hf_models import experts_modules, rel_err, small_config, twin_models  # noqa: E402
from hpmoe.transformers import _reference, experts  # noqa: E402

# CPU: fp32 on both sides, different summation orders and an all-reduce over W ranks: the project's fp32
# tolerance. GPU: bf16; each side is within 10 unit roundoffs of float64 (hpmoe.runtime.tolerances), so 20 u.
TOL = {"cpu": 1e-4, "cuda": 20 * 2.0 ** -8}


def batch(rank: int) -> torch.Tensor:
    ids = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(100 + rank))
    return ids.to(torch.cuda.current_device()) if torch.cuda.is_initialized() else ids


def main(arch: str, ep_size: int, device_type: str = "cpu") -> None:
    # HPMOE_SHARED_GPU=1: every rank on GPU 0 (kernels concurrent through CUDA MPS) over gloo, since NCCL
    # refuses two ranks on one GPU.
    shared = os.environ.get("HPMOE_SHARED_GPU") == "1"
    dist.init_process_group("gloo" if device_type == "cpu" or shared else "nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    tol = TOL[device_type]
    if device_type == "cpu":
        experts.set_ops(_reference)
        device, dtype, cfg = "cpu", torch.float32, small_config(arch, experts=8)
    else:
        device = torch.device("cuda", 0 if shared else int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        dtype, cfg = torch.bfloat16, small_config(arch, hidden=256, inter=128, experts=8, moe_layers=1)
    full, model = twin_models(cfg, ["grouped_mm", "hpmoe"], dtype=dtype, device=device)
    if ep_size:
        shards = ht.shard_experts(model, ep_size)
        assert shards.replicas == world // ep_size and shards.ep_size == ep_size
        DDP._set_params_and_buffers_to_ignore_for_model(model, shards.param_names)
    else:
        shards = ht.ExpertShards(None, 1, 0, None, world)  # nothing sharded: DDP averages every gradient
    ddp = DDP(model)

    loss = ddp(input_ids=batch(rank), labels=batch(rank)).loss
    loss.backward()
    if ep_size:
        shards.reduce_grads()
    ref_loss = sum(full(input_ids=batch(r), labels=batch(r)).loss for r in range(world)) / world
    ref_loss.backward()

    errs = {}
    ep_rank = shards.ep_rank
    ref_params = dict(full.named_parameters())
    for name, p in model.named_parameters():
        ref = ref_params[name].grad
        if name in shards.param_names:
            local = p.shape[0]
            assert local * shards.ep_size == ref.shape[0], f"{name}: {local} experts x {ep_size=} != {ref.shape[0]}"
            ref = ref[ep_rank * local:(ep_rank + 1) * local]
        errs[name] = rel_err(p.grad, ref)
    bad = {n: f"{e:.2e}" for n, e in errs.items() if not e <= tol}
    assert not bad, f"rank {rank} {arch=} {ep_size=}: gradients off by more than {tol}: {bad}"

    for m in (model, full):  # one SGD step on both, then the losses must still agree
        with torch.no_grad():
            for p in m.parameters():
                p -= 0.5 * p.grad
    new = ddp(input_ids=batch(rank), labels=batch(rank)).loss.detach()
    dist.all_reduce(new)
    with torch.no_grad():
        ref_new = sum(full(input_ids=batch(r), labels=batch(r)).loss for r in range(world)) / world
    err = abs(new.item() / world - ref_new.item()) / abs(ref_new.item())
    assert err <= tol, f"rank {rank} {arch=} {ep_size=}: loss after a step {new.item() / world} vs {ref_new.item()}"
    assert err < 1 and abs(ref_new.item() - ref_loss.item()) > 1e-3, "the step changed nothing: a vacuous check"
    n_experts = len(experts_modules(model))
    print(f"rank {rank}: {arch} EP {shards.ep_size} x {shards.replicas} replicas, {n_experts} MoE layers: "
          f"{len(errs)} gradients within {tol} (worst {max(errs.values()):.1e}), loss after a step within {err:.1e}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:2], int(sys.argv[2]), *sys.argv[3:4])
