"""The workspace that a rank's heap generations share.

The PyTorch op gives every forward in flight its own heap generation (hpmoe.torch.runtime), because what a
forward saves for its backward must survive other forwards. Workspace slots hold nothing across launches, so
generations whose launches run one after another (one stream) can use one copy of them: the forward's
(GMM2's output before the combine) and the backward's (dA, dH, the expert-side dX, and at EP 1 the received
dy rows and returned dx rows) even overlap, since a forward and a backward never run at once. A slot that
peers write (EP > 1) stays in the generation's heap: its address must be symmetric. The CUDA backend checks
the same rule (op_kernel/cuda/device_rank.cuh, PlaceableSlot).
"""
from __future__ import annotations

import dataclasses

from .config import MoeConfig, round_up
from .graphs import build_graph
from .odg import TensorSpec
from .ssc_format import Role, Slot

ALIGN = 256  # bytes: each slot starts on a 256-byte boundary (the copy engine needs 16)
DIRECTIONS = ("fwd", "bwd")


@dataclasses.dataclass(frozen=True)
class WorkspacePlan:
    offsets: dict[Slot, int]  # byte offset of each shared slot inside the workspace
    nbytes: int               # the workspace's size: the larger direction's slots


def placeable(spec: TensorSpec, ep: int) -> bool:
    """Holds nothing across launches, and no peer writes it (at EP 1 a put writes its own address)."""
    return spec.role == Role.WORKSPACE and (ep == 1 or not spec.symmetric)


def plan_workspace(cfg: MoeConfig) -> WorkspacePlan:
    """The shared slots of `cfg`'s schedules and their offsets; each direction's slots from offset 0."""
    users: dict[Slot, set[str]] = {}
    specs: dict[Slot, TensorSpec] = {}
    for direction in DIRECTIONS:
        for t in build_graph(cfg, direction).tensors():
            users.setdefault(t.slot, set()).add(direction)
            specs[t.slot] = t
    offsets: dict[Slot, int] = {}
    nbytes = 0
    for direction in DIRECTIONS:
        at = 0
        for slot in sorted(specs):
            if users[slot] == {direction} and placeable(specs[slot], cfg.ep):
                offsets[slot] = at
                at = round_up(at + specs[slot].nbytes, ALIGN)
        nbytes = max(nbytes, at)
    return WorkspacePlan(offsets, nbytes)
