"""Reads the AscendC stub's call log (op_host/ascend/stub_runner/c_api.cpp writes it) and checks the kernel's
synchronisation protocol. Each check returns a list of violations (empty = holds), so a test can show that a
broken log is caught."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

RECORD = np.dtype([("rank", "<u4"), ("core_type", "<i4"), ("block", "<u4"), ("op", "<u4"), ("arg", "<u4"),
                   ("pad", "<u4"), ("addr", "<u8"), ("bytes", "<u8")])
# stub_core.h: enum class Op
(COPY_IN, COPY_OUT, GM_READ, GM_WRITE, DCCI, BARRIER, ATOMIC_ADD, ATOMIC_NONE, FLAG_SET, FLAG_WAIT, MATMUL, KTYPE,
 ATOMIC_MAX) = range(13)
AIC, AIV = 1, 2
MIX_AIC_1_2 = 5
LINE = 64
HELLO = 32  # a rank's hello block in every window (op_kernel/ascend/window_setup.h)
SYNCALL_FLAGS = {11, 12, 13, 14}  # CrossCoreSetFlag(ISASI).md: SyncAll's ids


@dataclass
class Launch:
    records: np.ndarray
    ranks: list[dict]  # per rank: segment, counters, num_events, queues, num_queues

    def cores(self):
        """(rank, core_type, block) -> that core's records in program order."""
        out = {}
        for rec in self.records:
            out.setdefault((int(rec["rank"]), int(rec["core_type"]), int(rec["block"])), []).append(rec)
        return out

    def counter_rank(self, addr: int) -> int | None:
        for r in self.ranks:
            if r["counters"] <= addr < r["counters"] + r["num_events"] * LINE:
                return r["rank"]
        return None

    def segment_rank(self, addr: int, segment_bytes: int) -> int | None:
        for r in self.ranks:
            if r["segment"] <= addr < r["segment"] + segment_bytes:
                return r["rank"]
        return None


def load(path: Path) -> Launch:
    meta = json.loads(Path(str(path) + ".json").read_text())
    return Launch(np.fromfile(path, RECORD), meta["ranks"])


def check_counter_atomics(launch: Launch) -> list[str]:
    """Every atomic DMA targets one whole 64-byte counter line, and a barrier separates it from the core's
    last output or payload write before it."""
    bad = []
    for core, recs in launch.cores().items():
        last_write = None
        barrier_since = True
        for i, rec in enumerate(recs):
            op = int(rec["op"])
            if op == COPY_OUT and rec["arg"] == 1:
                addr = int(rec["addr"])
                if launch.counter_rank(addr) is None:
                    bad.append(f"{core} record {i}: atomic DMA to {addr:#x}, not an event counter")
                if addr % LINE or rec["bytes"] != LINE:
                    bad.append(f"{core} record {i}: counter update of {rec['bytes']} bytes at {addr:#x} "
                               "is not one aligned 64-byte line")
                if last_write is not None and not barrier_since:
                    bad.append(f"{core} record {i}: signal without a barrier after the write at record {last_write}")
            elif op in (COPY_OUT, MATMUL, GM_WRITE):
                last_write, barrier_since = i, False
            elif op == BARRIER:
                barrier_since = True
    return bad


def is_hello(launch: Launch, addr: int) -> bool:
    return any(r["handshake"] <= addr < r["handshake"] + len(launch.ranks) * HELLO for r in launch.ranks)


def check_first_launch_handshake(launch: Launch) -> list[str]:
    """First launch (window_setup.h): AIV block 0 of each rank zeroes all its counters and its abort line,
    then, after a barrier, writes its hello block into every rank's window; no core signals a counter before
    it read every rank's hello block in its own window."""
    bad, ep = [], len(launch.ranks)
    by_rank = {r["rank"]: r for r in launch.ranks}
    for core, recs in launch.cores().items():
        me = by_rank[core[0]]
        if not me["first_use"]:
            continue
        seen, zeroed, last_zero, barrier_after_zero, hellos = set(), 0, None, False, set()
        for i, rec in enumerate(recs):
            op, addr = int(rec["op"]), int(rec["addr"])
            if op == GM_READ and me["handshake"] <= addr < me["handshake"] + ep * HELLO:
                seen.add((addr - me["handshake"]) // HELLO)
            elif op == COPY_OUT and rec["arg"] == 1 and len(seen) < ep:
                bad.append(f"{core} record {i}: signal before it saw every rank's hello (saw {sorted(seen)})")
                break
            elif op == COPY_OUT and rec["arg"] == 0 and me["zero"] <= addr < me["zero"] + me["zero_bytes"]:
                zeroed, last_zero, barrier_after_zero = zeroed + int(rec["bytes"]), i, False
            elif op == COPY_OUT and rec["arg"] == 0 and addr == me["abort"]:
                last_zero, barrier_after_zero = i, False
            elif op == BARRIER and last_zero is not None:
                barrier_after_zero = True
            elif op == COPY_OUT and is_hello(launch, addr):
                if not barrier_after_zero:
                    bad.append(f"{core} record {i}: hello sent without a barrier after the zeroing DMAs")
                hellos.add(next(r["rank"] for r in launch.ranks if r["handshake"] + core[0] * HELLO == addr))
        if core[1:] == (AIV, 0) and (zeroed != me["zero_bytes"] or hellos != set(by_rank)):
            bad.append(f"{core}: zeroed {zeroed} of {me['zero_bytes']} counter bytes, said hello to {sorted(hellos)}")
    return bad


def check_puts_signal_after_payload(launch: Launch, segment_bytes: int) -> list[str]:
    """A payload DMA into a peer's segment is followed by a barrier and then an atomic add on a counter of
    that peer, before the core writes anything else."""
    bad = []
    for core, recs in launch.cores().items():
        pending = None  # (record index, destination rank) of a payload not yet signalled
        seen_barrier = False
        for i, rec in enumerate(recs):
            op = int(rec["op"])
            if op == COPY_OUT and rec["arg"] == 0:
                dst = launch.segment_rank(int(rec["addr"]), segment_bytes)
                if (dst is not None and dst != core[0] and launch.counter_rank(int(rec["addr"])) is None
                        and not is_hello(launch, int(rec["addr"]))):
                    if pending is None:
                        pending = (i, dst)
                    seen_barrier = False
            elif op == BARRIER:
                seen_barrier = True
            elif op == COPY_OUT and rec["arg"] == 1 and pending is not None:
                if not seen_barrier:
                    bad.append(f"{core} record {i}: put of record {pending[0]} signalled without a barrier")
                if launch.counter_rank(int(rec["addr"])) != pending[1]:
                    bad.append(f"{core} record {i}: put to rank {pending[1]} signalled a counter of another rank")
                pending = None
        if pending is not None:
            bad.append(f"{core}: payload at record {pending[0]} to rank {pending[1]} was never signalled")
    return bad


def check_spins_reread_through_cache(launch: Launch) -> list[str]:
    """Every scalar read of a counter comes right after a DataCacheCleanAndInvalid of its line."""
    bad = []
    for core, recs in launch.cores().items():
        for i, rec in enumerate(recs):
            if int(rec["op"]) != GM_READ or launch.counter_rank(int(rec["addr"])) is None:
                continue
            prev = recs[i - 1] if i > 0 else None
            line = int(rec["addr"]) // LINE * LINE
            if prev is None or int(prev["op"]) != DCCI or int(prev["addr"]) != line:
                bad.append(f"{core} record {i}: counter read at {int(rec['addr']):#x} without a dcci of its line")
    return bad


def check_queue_types(launch: Launch, num_aic: int) -> list[str]:
    """AIC block b reads only CTQ record b, AIV block v only VTQ record num_aic + v; cube work only on AICs."""
    bad = []
    for (rank, ctype, block), recs in launch.cores().items():
        q = next(r for r in launch.ranks if r["rank"] == rank)
        read = {(int(x["addr"]) - q["queues"]) // 16 for x in recs
                if int(x["op"]) == GM_READ and q["queues"] <= int(x["addr"]) < q["queues"] + 16 * q["num_queues"]}
        want = block if ctype == AIC else num_aic + block
        if read != {want}:
            bad.append(f"rank {rank} {'AIC' if ctype == AIC else 'AIV'} {block}: read queue records {sorted(read)}, "
                       f"expected only {want}")
        if ctype == AIV and any(int(x["op"]) == MATMUL for x in recs):
            bad.append(f"rank {rank} AIV {block}: ran a Matmul")
    return bad


def check_flags_and_kernel_type(launch: Launch, matmul_objects: int = 1) -> list[str]:
    """No cross-core flag id reserved by SyncAll (11-14) or the Matmul API (0 .. 2N-1); every core ran as
    KERNEL_TYPE_MIX_AIC_1_2."""
    bad = []
    reserved = SYNCALL_FLAGS | set(range(2 * matmul_objects))
    for core, recs in launch.cores().items():
        for i, rec in enumerate(recs):
            if int(rec["op"]) in (FLAG_SET, FLAG_WAIT) and int(rec["arg"]) in reserved:
                bad.append(f"{core} record {i}: cross-core flag id {int(rec['arg'])} is reserved")
        types = [int(r["arg"]) for r in recs if int(r["op"]) == KTYPE]
        if types != [MIX_AIC_1_2]:
            bad.append(f"{core}: kernel type records {types}, expected [{MIX_AIC_1_2}]")
    return bad
