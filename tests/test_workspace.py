"""The workspace that heap generations share (workspace.py): which slots, where, how large. The rule must keep
everything a forward saves for its backward, and at EP > 1 everything peers write, in the generation's own
heap; the CUDA backend refuses the rest (tests/cuda/test_torch_moeffn.py checks that and the bits)."""
from __future__ import annotations

import pytest

from hpmoe.config import make_config
from hpmoe.graphs import build_graph, tensor_specs
from hpmoe.ssc_format import Role, Slot
from hpmoe.workspace import ALIGN, plan_workspace

BASE = dict(tokens=512, hidden=256, inter=128, experts_per_rank=4, topk=4, dtype="bf16", tile_m=128, wgrad_tile=128,
            num_aic=8, num_aiv=4, mixed_queues=True, claim_pool=True)
# The slots op_kernel/cuda/device_rank.cuh's PlaceableSlot admits (the C++ rule, written out independently).
PLACEABLE_ANY_EP = {Slot.Y_EXPERT, Slot.DA, Slot.DH, Slot.DX_EXPERT}
PLACEABLE_EP1 = PLACEABLE_ANY_EP | {Slot.RECV_DY, Slot.RET_DX}


def _regions(plan, cfg, slots):
    specs = tensor_specs(cfg)
    return sorted((plan.offsets[s], plan.offsets[s] + specs[s].nbytes) for s in slots)


@pytest.mark.parametrize("ep", [1, 2, 4])
@pytest.mark.parametrize("fused", [False, True])
def test_shared_slots_hold_nothing_across_launches_and_never_overlap_within_a_direction(ep, fused):
    cfg = make_config(None, dict(BASE, ep=ep, fuse_swiglu=fused))
    plan = plan_workspace(cfg)
    specs = tensor_specs(cfg)
    shared = set(plan.offsets)
    assert shared <= (PLACEABLE_EP1 if ep == 1 else PLACEABLE_ANY_EP)
    assert all(specs[s].role == Role.WORKSPACE for s in shared)
    if ep > 1:
        assert not any(specs[s].symmetric for s in shared)
    used = {d: {t.slot for t in build_graph(cfg, d).tensors()} for d in ("fwd", "bwd")}
    assert Slot.Y_EXPERT in shared and Slot.DX_EXPERT in shared
    assert (Slot.DA in shared) == (not fused)  # the fused backward never stores dA
    for d in ("fwd", "bwd"):
        mine = [s for s in shared if s in used[d]]
        assert all(s not in used["bwd" if d == "fwd" else "fwd"] for s in mine)
        regions = _regions(plan, cfg, mine)
        assert all(a[1] <= b[0] for a, b in zip(regions, regions[1:])), f"{d}: overlapping slots {regions}"
        assert all(start % ALIGN == 0 for start, _ in regions)
        assert regions[-1][1] <= plan.nbytes
    # The workspace is the larger direction, not the sum: a forward and a backward never run at once.
    per_dir = [sum(specs[s].nbytes for s in shared if s in used[d]) for d in ("fwd", "bwd")]
    assert max(per_dir) <= plan.nbytes < max(per_dir) + ALIGN * len(shared)


def test_deepseek_v3_8192_tokens_sizes():
    """The figures docs/cuda.md quotes: a generation's heap loses 3.4 GiB of backward workspace and 0.9 of
    forward workspace; one 3.4 GiB workspace serves every generation."""
    cfg = make_config(None, dict(BASE, ep=1, tokens=8192, hidden=7168, inter=2048, experts_per_rank=8, topk=8,
                                 num_aic=128))
    plan = plan_workspace(cfg)
    rows = 8192 * 8  # EP 1 bucket: every (token, k) pair
    assert plan.offsets[Slot.Y_EXPERT] == 0 and plan.offsets[Slot.RECV_DY] == 0
    assert plan.nbytes == rows * 2 * (7168 * 3 + 2048 * 3)  # RECV_DY, DX_EXPERT, RET_DX [h]; DA [I], DH [2I]
    assert abs(plan.nbytes / 2**30 - 3.375) < 1e-9
