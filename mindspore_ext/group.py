"""The EP group of a cell: its name, size and this process's rank in it, and a key naming its shared heap.
Default: the world group when MindSpore's collectives are initialised (msrun + init()), else one rank."""
from __future__ import annotations

import os
import zlib

import numpy as np

from hpmoe.errors import HpmoeError


def resolve_group(group: str | None) -> tuple[str | None, int, int]:
    """(group name or None for a plain process, EP size, rank in the group)."""
    from mindspore.communication import management as comm

    if group is None:
        if not comm.GlobalComm.INITED:
            return None, 1, 0
        group = comm.GlobalComm.WORLD_COMM_GROUP
    elif not comm.GlobalComm.INITED:
        raise HpmoeError(f"hpmoe.mindspore: group={group!r} given but MindSpore's collectives are not "
                         "initialised (launch with msrun and call mindspore.communication.init() first)")
    return group, comm.get_group_size(group), comm.get_rank(group)


def group_key(group: str | None, ep: int) -> str | None:
    """A name every rank of the group derives alike: the launcher's process id (msrun is the parent of
    every rank on this host), the scheduler port and the group; checked equal on all ranks through an
    AllGather (a few bytes, no token data)."""
    if ep == 1:
        return None
    port = os.environ.get("MS_SCHED_PORT", "0")
    key = f"{os.getppid()}-{port}-{zlib.crc32(group.encode()) % 10**6}"
    _check_same_everywhere(group, ep, key)
    return key


def _check_same_everywhere(group: str, ep: int, key: str) -> None:
    import mindspore as ms
    from mindspore import ops

    digest = np.frombuffer(key.encode().ljust(64, b"\0")[:64], np.uint8).astype(np.int32)
    gathered = ops.AllGather(group)(ms.Tensor(digest[None, :])).asnumpy()
    if not (gathered == gathered[:1]).all():
        raise HpmoeError(f"hpmoe.mindspore: the ranks of group {group} disagree on the shared heap's name "
                         f"(ranks not launched by one msrun on one host?)")
