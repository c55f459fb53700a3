"""Bad input and lost signals on --backend ascendc-cpu: one line naming what was wrong, a non-zero exit, never
a hang. The kernel's waits are bounded (the reference implementation's are not)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from ascend_helpers import case
from hpmoe.runtime import native
from hpmoe.runtime.twin import CpuTwin


def test_lost_signal_ends_in_a_report_naming_rank_worker_task_event():
    """Rank 2 skips the second forward: its peers' waits on what rank 2 would have sent time out with a report.
    (A rank missing from the first launch is caught earlier, by the window handshake: test_ascend_windows.)"""
    cfg, inputs, _, schedules = case("random", seed=1, dtype="fp32", ep=3, topk=2)
    with CpuTwin(cfg, schedules, timeout_s=0.3, backend="ascendc-cpu") as twin:
        twin.load_inputs(inputs)
        twin.open_ranks()
        native.run(twin.ranks, "fwd")
        with pytest.raises(native.RuntimeFailure) as err:
            native.run(twin.ranks[:2], "fwd")
        msg = str(err.value)
        assert "\n" not in msg
        assert msg.startswith("rank ") and " worker " in msg and "task " in msg and "wait timed out on event" in msg, msg
        assert "invocation 2" in msg, msg
        # The failure marked the heap: a later launch is refused instead of running on stale state.
        with pytest.raises(native.RuntimeFailure, match="marked failed"):
            native.run(twin.ranks, "fwd")


def test_corrupted_ssc_is_refused_by_the_shared_loader_before_any_launch():
    cfg, inputs, _, schedules = case("random", seed=1, dtype="fp32", ep=2, topk=2)
    with CpuTwin(cfg, schedules, backend="ascendc-cpu") as twin:
        bad = bytearray(twin.ssc["fwd"][0])
        bad[len(bad) // 2] ^= 0x40
        with pytest.raises(native.RuntimeFailure, match="rank 0 fwd SSC"):
            native.RankHandle(twin.heap, 0, bytes(bad), twin.ssc["bwd"][0])


def test_ssc_of_another_rank_is_refused():
    cfg, inputs, _, schedules = case("random", seed=1, dtype="fp32", ep=2, topk=2)
    with CpuTwin(cfg, schedules, backend="ascendc-cpu") as twin:
        with pytest.raises(native.RuntimeFailure, match="rank"):
            native.RankHandle(twin.heap, 0, twin.ssc["fwd"][1], twin.ssc["bwd"][0])


def test_mixed_queues_ssc_is_refused_by_the_tiling_builder():
    """An AIC cannot run the vector tasks mixed queues deal to cube workers: refused before any launch."""
    cfg, inputs, _, schedules = case("random", seed=1, dtype="fp32", ep=2, topk=2, mixed_queues=True)
    with CpuTwin(cfg, schedules, timeout_s=5.0, backend="ascendc-cpu") as twin:
        twin.load_inputs(inputs)
        twin.open_ranks()
        with pytest.raises(native.RuntimeFailure, match="mixed queues.*--no-mixed-queues") as err:
            native.run(twin.ranks, "fwd")
        assert "\n" not in str(err.value)


def _hpmoe(*args):
    return subprocess.run([sys.executable, "-m", "hpmoe.cli", "run", "--backend", "ascendc-cpu", *args],
                          capture_output=True, text=True, timeout=120)


def test_cli_refuses_worker_counts_a_mixed_launch_cannot_give():
    p = _hpmoe("--workers-aic", "2", "--workers-aiv", "3")
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "--workers-aiv 4" in lines[0], p.stderr


def test_cli_refuses_more_ai_cores_than_the_device_has():
    p = _hpmoe("--workers-aic", "26", "--workers-aiv", "52", "--threads")
    assert p.returncode != 0
    assert "26 AI cores" in p.stderr and "has 25" in p.stderr, p.stderr


def test_cli_runs_and_checks_every_output():
    p = _hpmoe("--ep", "3", "--topk", "3", "--routing", "skewed", "--dtype", "bf16", "--iterations", "2")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "backend=ascendc-cpu ranks as processes" in p.stdout
    for name in ("y", "dx", "dw1", "dw2", "dtopk_weights"):
        assert any(line.startswith(name) and line.endswith("ok") for line in p.stdout.splitlines()), p.stdout


def test_corrupted_counts_from_a_peer_fail_the_task_not_the_memory():
    """Rank 0 sends a row count past the bucket: rank 1's handlers refuse it (error 101) and the launch ends in
    one line instead of reading or writing past the receive slot."""
    from hpmoe.ssc_format import Slot

    cfg, inputs, _, schedules = case("random", seed=4, dtype="fp32", ep=2, topk=2)
    with CpuTwin(cfg, schedules, timeout_s=2.0, backend="ascendc-cpu") as twin:
        twin.load_inputs(inputs)
        counts = twin.heap.view(0, Slot.SEND_COUNTS)
        counts[1, 0] = cfg.recv_rows_per_src + 1
        with pytest.raises(native.RuntimeFailure) as err:
            twin.run_threads("fwd")
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith("rank 1 ") and "handler failed (101" in msg, msg
