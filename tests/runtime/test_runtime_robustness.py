"""Bad SSCs are refused with one line before anything runs; every wait is bounded and reports where it was
stuck; a failing worker stops the whole group with its report."""
from __future__ import annotations

import re
import zlib

import pytest

from hpmoe import ssc_io
from hpmoe.compiler import compile_schedules
from hpmoe.errors import RoutingError
from hpmoe.runtime import native
from hpmoe.runtime.twin import CpuTwin, Fault
from hpmoe.ssc_format import HEADER_DTYPE, Slot

from runtime_helpers import case

CHECKSUM = HEADER_DTYPE.fields["checksum"][1]


def _rechecksum(data: bytearray) -> bytes:
    data[CHECKSUM:CHECKSUM + 4] = b"\0\0\0\0"
    data[CHECKSUM:CHECKSUM + 4] = (zlib.crc32(bytes(data)) & 0xFFFFFFFF).to_bytes(4, "little")
    return bytes(data)


def _with_field(data: bytes, field: str, value: int, size: int = 4) -> bytes:
    out = bytearray(data)
    off = HEADER_DTYPE.fields[field][1]
    out[off:off + size] = value.to_bytes(size, "little")
    return _rechecksum(out)


@pytest.fixture(scope="module")
def twin():
    cfg, inputs, _ = case(ep=2)
    t = CpuTwin(cfg, timeout_s=0.5)
    t.load_inputs(inputs)
    yield t
    t.close()


def _open(twin, rank=0, fwd=None, bwd=None):
    return native.RankHandle(twin.heap, rank, fwd, bwd, native.RankOptions(timeout_ms=500))


def _task_offset(data: bytes, task: int, field_offset: int) -> int:
    sections = HEADER_DTYPE.fields["sections"][1]
    tasks_off = int.from_bytes(data[sections + 16:sections + 20], "little")  # section 1 = tasks
    return tasks_off + task * 208 + field_offset


CORRUPTIONS = {
    "truncated": (lambda d: d[:100], r"truncated"),
    "cut short": (lambda d: d[:-16], r"truncated or padded"),
    "bit flip": (lambda d: d[:500] + bytes([d[500] ^ 0x10]) + d[501:], r"checksum mismatch"),
    "wrong version": (lambda d: _with_field(d, "version_major", 2, 2), r"SSC version 2\.\d+, this build reads 1\.x"),
    "bad magic": (lambda d: _with_field(d, "magic", 0x12345678), r"not an SSC file"),
    "wrong rank": (lambda d: _with_field(d, "rank", 1), r"is for rank 1, loaded on rank 0"),
    "wrong direction": (lambda d: _with_field(d, "direction", 1), r"is a bwd schedule, given as the fwd one"),
    "empty": (lambda d: b"", r"truncated: 0 bytes"),
    "trigger past counters": (
        lambda d: _rechecksum(bytearray(d[:_task_offset(d, 0, 16)] + (10 ** 6).to_bytes(4, "little")
                                        + d[_task_offset(d, 0, 16) + 4:])),
        r"triggers event 1000000"),
    "task type": (
        lambda d: _rechecksum(bytearray(d[:_task_offset(d, 3, 0)] + (99).to_bytes(4, "little")
                                        + d[_task_offset(d, 3, 0) + 4:])),
        r"task 3: unknown task_type 99"),
}


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_bad_ssc_is_one_line_error(twin, name):
    corrupt, pattern = CORRUPTIONS[name]
    with pytest.raises(native.RuntimeFailure) as info:
        _open(twin, fwd=corrupt(twin.ssc["fwd"][0]))
    message = str(info.value)
    assert "\n" not in message and re.search(pattern, message), message
    assert message.startswith("rank 0 fwd SSC: ")


def test_mismatched_config_is_refused(twin):
    other = twin.cfg.replace(hidden=32, wgrad_tile=16)
    data = ssc_io.to_bytes(compile_schedules(other, ["fwd"], [0])[0])
    with pytest.raises(native.RuntimeFailure, match=r"SSC compiled for hidden=32, runtime has hidden=64"):
        _open(twin, fwd=data)


def test_wait_timeout_reports_where_it_was_stuck(twin):
    """Only rank 0 runs: its puts wait for every peer's entry signal, which never comes."""
    ranks = [_open(twin, r, fwd=twin.ssc["fwd"][r]) for r in range(2)]
    try:
        with pytest.raises(native.RuntimeFailure) as info:
            native.run(ranks[:1], "fwd")
    finally:
        for r in ranks:
            r.close()
    message = str(info.value)
    m = re.search(r"^rank 0 (AIC|AIV) worker \d+: task \d+ \((\w+), queue position \d+\): wait timed out on "
                  r"event \d+: counter (\d+), needs (\d+) \(threshold (\d+), invocation 1\)", message)
    assert m, message
    assert int(m.group(3)) < int(m.group(4)) == int(m.group(5))


def test_failing_worker_stops_the_group():
    cfg, inputs, _ = case(ep=3)
    with CpuTwin(cfg, timeout_s=20.0) as t:
        t.load_inputs(inputs)
        t.open_ranks(Fault(rank=1, mode="fail", after=4, direction="fwd"))
        with pytest.raises(native.RuntimeFailure) as info:
            t.run_threads("fwd")
        message = str(info.value)
        assert re.search(r"^rank 1 AIV worker \d+: task \d+ \(\w+, queue position \d+\): injected fault", message)
        assert re.search(r"\(\+\d+ more workers stopped\)$", message), message
        with pytest.raises(native.RuntimeFailure, match=r"marked failed \(rank 1 failed earlier\)"):
            t.run_threads("fwd")


def test_routing_beyond_bucket_refused_before_any_data_moves():
    cfg, inputs, _ = case(routing="skewed", ep=2, recv_rows_per_src=16)
    with CpuTwin(cfg) as t:
        with pytest.raises(RoutingError, match=r"the SSC bucket holds C=16; compile with --recv-rows-per-src"):
            t.load_inputs(inputs)
        assert not t.heap.view(0, Slot.X).any() and not t.heap.view(0, Slot.SEND_COUNTS).any()


def test_corrupted_counts_fail_in_the_handler_not_overrun():
    """A peer that sends counts beyond the bucket makes GMM refuse its tile (no write outside the slot)."""
    cfg, inputs, _ = case(ep=2)
    with CpuTwin(cfg, timeout_s=5.0) as t:
        t.load_inputs(inputs)
        t.heap.view(1, Slot.SEND_COUNTS)[0, 0] = cfg.recv_rows_per_src + 5  # rank 1 lies to rank 0
        with pytest.raises(native.RuntimeFailure, match=r"^rank 0 AIC worker \d+: task \d+ \(GMM.*handler failed "
                                                        r"\(101: received per-expert counts"):
            t.run_threads("fwd")


def test_dynamic_dispatch_stall_is_reported_not_hung():
    """Dynamic mode has no per-task waits; a dependency that never completes must still end in a report."""
    cfg, inputs, _ = case(ep=2)
    with CpuTwin(cfg, timeout_s=0.5) as fresh:  # its own heap: a failure marks a heap failed for good
        fresh.load_inputs(inputs)
        broken = ssc_io.from_bytes(fresh.ssc["fwd"][1])
        broken.events[0]["threshold"] += 1  # the entry event of rank 1 now waits for a signal nobody sends
        ranks = [_open(fresh, 0, fwd=fresh.ssc["fwd"][0]), _open(fresh, 1, fwd=ssc_io.to_bytes(broken))]
        try:
            with pytest.raises(native.RuntimeFailure) as info:
                native.run(ranks, "fwd", dynamic=True)
        finally:
            for r in ranks:
                r.close()
    message = str(info.value)
    assert "\n" not in message, message
    assert re.search(r"dynamic dispatch: rank [01] (CTQ|VTQ) ready queue idle past the timeout after \d+ of \d+ tasks",
                     message), message
