"""Expert parallelism for a transformers model (shard_experts, the EP and replica groups, the gradient
reduction) on CPU ranks under torchrun with gloo, moe_ffn replaced by its stand-in; ep_worker.py holds the
checks. Also the refusals of shard_experts. Skipped without torch or transformers."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (optional dependency)")
pytest.importorskip("transformers", reason="transformers is not installed (optional dependency)")

import hpmoe.transformers as ht  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from hf_models import small_config, twin_models  # noqa: E402

WORKER = Path(__file__).parent / "ep_worker.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("arch, world, ep", [
    ("qwen3_moe", 2, 2),     # pure EP: no replicas
    ("deepseek_v3", 4, 2),   # EP 2 x 2 data-parallel replicas of each shard
    ("mixtral", 2, 1),       # shard_experts with EP 1: every rank all experts, replicas averaged
    ("mixtral", 2, 0),       # no shard_experts: plain DDP, each rank's moe_ffn on a group of its own
])
def test_sharded_training_step_matches_the_unsharded_model(arch, world, ep):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(world), "--master_addr",
           "127.0.0.1", "--master_port", str(_free_port()), str(WORKER), arch, str(ep)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    reports = re.findall(r"rank \d+: \w+ EP", proc.stdout)  # the ranks' lines may interleave
    assert proc.returncode == 0 and len(reports) == world, \
        f"{arch=} {world=} {ep=}: rc {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


@pytest.fixture()
def world_of_one(tmp_path):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_shard_experts_refusals(world_of_one):
    (grouped,) = twin_models(small_config("qwen3_moe", experts=8), ["grouped_mm"])
    with pytest.raises(ValueError, match="runs experts_implementation='grouped_mm'"):
        ht.shard_experts(grouped)
    (model,) = twin_models(small_config("qwen3_moe", experts=8), ["hpmoe"])
    with pytest.raises(ValueError, match="ep_size=3 must divide the world size 1"):
        ht.shard_experts(model, 3)
    shards = ht.shard_experts(model)
    assert shards.ep_size == 1 and shards.replicas == 1 and len(shards.param_names) == 4
    with pytest.raises(ValueError, match="is already sharded"):
        ht.shard_experts(model)


def test_shard_experts_needs_torch_distributed():
    (model,) = twin_models(small_config("qwen3_moe", moe_layers=1), ["hpmoe"])
    with pytest.raises(RuntimeError, match="needs torch.distributed initialised"):
        ht.shard_experts(model)
