"""The MC2 window set-up (op_kernel/ascend/window_setup.h). The stub's HCCL windows start as garbage, as HCCL
promises nothing about them; the kernel's first launch zeroes each rank's counters and abort line, and a
handshake through nonce-carrying hello blocks keeps every rank from signalling a peer that has not zeroed yet.
The kernel before this set-up fails every test here (garbage counters and abort word: handler error 101 or
aborts on the first launch; entry signals into a peer that never launched)."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from ascend_helpers import case
from hpmoe.runtime import native
from hpmoe.runtime.twin import CpuTwin

ABORT_OFFSET = 64  # cpu::ControlBlock::abort_rank_plus1
HANDSHAKE_OFFSET, HELLO = 2048, 32


def _segment(twin, rank: int) -> np.ndarray:
    n = twin.layout.segment_bytes
    return np.frombuffer((ctypes.c_uint8 * n).from_address(twin.heap.base + rank * n), np.uint8).copy()


def test_windows_start_as_garbage():
    cfg, _, _, schedules = case("random", seed=1, dtype="fp32", ep=2, topk=2)
    with CpuTwin(cfg, schedules, backend="ascendc-cpu") as twin:
        for r in range(cfg.ep):
            seg = _segment(twin, r)
            counters = seg[twin.layout.counter_offsets[0]:].view(np.int32)
            assert np.count_nonzero(counters) > 0.9 * counters.size, "counters should start as garbage"
            assert seg[ABORT_OFFSET:ABORT_OFFSET + 4].view(np.int32)[0] != 0, "the abort word should be garbage"


def test_first_launch_never_touches_a_rank_that_has_not_zeroed():
    """Ranks 0 and 1 launch the first forward, rank 2 never does: they stop in the handshake, naming rank 2,
    and rank 2's window is unchanged except for the hello blocks they left in it."""
    cfg, inputs, _, schedules = case("random", seed=1, dtype="fp32", ep=3, topk=2)
    with CpuTwin(cfg, schedules, timeout_s=0.3, backend="ascendc-cpu") as twin:
        twin.load_inputs(inputs)
        twin.open_ranks()
        before = _segment(twin, 2)
        with pytest.raises(native.RuntimeFailure) as err:
            native.run(twin.ranks[:2], "fwd")
        msg = str(err.value)
        assert "\n" not in msg and "handshake timed out: rank 2 never said hello" in msg, msg
        after = _segment(twin, 2)
        changed = np.flatnonzero(before != after)
        hellos = (changed >= HANDSHAKE_OFFSET) & (changed < HANDSHAKE_OFFSET + 2 * HELLO)
        assert np.all(hellos), f"rank 2's window changed outside the hello blocks at offsets {changed[~hellos][:8]}"
        assert hellos.any(), "ranks 0 and 1 should have said hello to rank 2"


def test_garbage_windows_ranks_as_processes_bitwise_equal_to_the_twin():
    """Each rank a process that launches on its own (no host barrier): two fwd + bwd rounds on garbage windows
    give the CPU twin's bits."""
    cfg, inputs, _, schedules = case("skewed", seed=21, dtype="bf16", ep=3, topk=3)
    outputs = {}
    for backend in ("cpu", "ascendc-cpu"):
        with CpuTwin(cfg, schedules, shared_memory=True, timeout_s=30.0, backend=backend) as twin:
            twin.load_inputs(inputs)
            twin.run_processes(iterations=2)
            outputs[backend] = twin.raw_outputs()
    for name in ("y", "dx", "dw1", "dw2"):
        a, b = outputs["cpu"][name], outputs["ascendc-cpu"][name]
        assert a.tobytes() == b.tobytes(), f"{name}: {np.count_nonzero(a != b)} elements differ"
