"""Faults seen by the `hpmoe run` launcher: a stopped or dead rank is reported within the wait timeout plus a
small margin however many iterations were asked for; SIGTERM/SIGHUP leave no shared memory and no rank
process behind; a segment left by a SIGKILLed launcher is removed by the next run, a live launcher's is kept."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hpmoe.errors import ConfigError
from hpmoe.runtime import native
from hpmoe.runtime.shm_names import SHM_DIR, remove_stale_segments, segment_name
from hpmoe.runtime.twin import CpuTwin

from runtime_helpers import case

TIMEOUT_S = 1.5
MARGIN_S = 2.5      # poll interval, process exit and reaping on a loaded 2-core machine
ITERATIONS = 100000  # far more than the test lets run: the report must not wait for them


def _stop_or_kill_rank_while_running(sig: int, ep: int = 3, victim: int = 1) -> tuple[str, float]:
    """Runs `ep` ranks as processes for many iterations; once all run, sends `sig` to rank `victim`. Returns
    the launcher's report and the seconds from the signal to the report."""
    cfg, inputs, _ = case(ep=ep)
    sent = {}

    def signal_rank(twin: CpuTwin) -> None:
        while len(twin.rank_pids) < cfg.ep:
            time.sleep(0.01)
        time.sleep(0.5)  # every rank is inside its launches
        sent["at"] = time.monotonic()
        os.kill(twin.rank_pids[victim], sig)

    with CpuTwin(cfg, shared_memory=True, timeout_s=TIMEOUT_S, handlers="null") as twin:
        twin.load_inputs(inputs)
        helper = threading.Thread(target=signal_rank, args=(twin,))
        helper.start()
        with pytest.raises(native.RuntimeFailure) as info:
            twin.run_processes(ITERATIONS)
        reported = time.monotonic()
        helper.join()
    return str(info.value), reported - sent["at"]


def test_stopped_rank_is_reported_within_timeout_plus_margin():
    message, seconds = _stop_or_kill_rank_while_running(signal.SIGSTOP)
    assert seconds < TIMEOUT_S + MARGIN_S, (seconds, message)
    assert message.startswith("rank 1 process was stopped (SIGSTOP or a debugger)"), message


def test_stopped_lone_rank_is_reported_too():
    """ep 1: no peer waits on the stopped rank, so only the launcher's stopped-state watch can see it."""
    message, seconds = _stop_or_kill_rank_while_running(signal.SIGSTOP, ep=1, victim=0)
    assert TIMEOUT_S <= seconds < TIMEOUT_S + MARGIN_S, (seconds, message)
    assert message.startswith("rank 0 process was stopped (SIGSTOP or a debugger)"), message


def test_dead_rank_is_reported_at_once_and_peers_stop():
    message, seconds = _stop_or_kill_rank_while_running(signal.SIGKILL)
    # the launcher sees the death itself and aborts the group: no wait has to time out first
    assert seconds < MARGIN_S, (seconds, message)
    assert message.startswith("rank 1 process died (SIGKILL)"), message
    # each peer stops at its next wait, or refuses its next launch if the abort came between two launches
    for peer in (0, 2):
        pattern = rf"rank {peer}: rank {peer}[^;]*(stopped after rank 1 failed|rank 1 failed earlier)"
        assert re.search(pattern, message), message


def _segments_of(pid: int) -> list[str]:
    return [p.name for p in SHM_DIR.glob(f"hpmoe-{pid}-*")]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_signalled_launcher_removes_its_segment_and_ranks(sig):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    launcher = subprocess.Popen([sys.executable, "-m", "hpmoe.cli", "run", "--iterations", str(ITERATIONS),
                                 "--timeout", "5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
    try:
        deadline = time.monotonic() + 60
        children: list[int] = []
        while time.monotonic() < deadline and not (_segments_of(launcher.pid) and len(children) == 4):
            children = [int(c) for c in Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children")
                        .read_text().split()] if launcher.poll() is None else []
            time.sleep(0.05)
        assert _segments_of(launcher.pid) and len(children) == 4, "the launcher never started its ranks"
        launcher.send_signal(sig)
        _, err = launcher.communicate(timeout=30)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == 128 + sig, err
    assert err == f"hpmoe run: terminated by {signal.Signals(sig).name}; rank processes stopped, shared memory " \
                  f"removed\n", err
    assert _segments_of(launcher.pid) == []
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2], pid


def test_stale_segment_of_dead_launcher_is_removed_live_one_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid now belongs to no process
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        names = [segment_name(dead.pid), segment_name(live.pid)]
        for name in names:
            (tmp_path / name).write_bytes(b"\0" * 64)
        (tmp_path / "unrelated-1").write_bytes(b"")
        removed = remove_stale_segments(tmp_path)
        assert removed == [names[0]]
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([names[1], "unrelated-1"])
    finally:
        live.kill()
        live.wait()


def test_segment_of_a_reused_pid_is_stale(tmp_path):
    """A pid that now runs a process started after the segment was last written cannot be its owner."""
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        name = segment_name(live.pid)
        (tmp_path / name).write_bytes(b"")
        old = time.time() - 3600
        os.utime(tmp_path / name, (old, old))
        assert remove_stale_segments(tmp_path) == [name]
    finally:
        live.kill()
        live.wait()


def test_launcher_sweeps_stale_segments_before_creating_its_own():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = SHM_DIR / segment_name(dead.pid)
    stale.write_bytes(b"\0" * 64)
    cfg, inputs, _ = case(ep=2)
    with CpuTwin(cfg, shared_memory=True, timeout_s=5.0) as twin:
        assert stale.name in twin.stale_removed
        assert not stale.exists()
        assert (SHM_DIR / twin.shm_name).exists()
    assert not (SHM_DIR / twin.shm_name).exists()


@pytest.mark.parametrize("timeout_ms", [0, 86400001, 2**64 - 1])
def test_rank_refuses_a_zero_or_unbounded_wait_timeout(timeout_ms):
    """The C ABI checks the bound itself: 0 fails every wait, a huge value wraps the nanosecond product."""
    cfg, _, _ = case(ep=2)
    with CpuTwin(cfg) as twin:
        with pytest.raises(native.RuntimeFailure, match=rf"wait timeout {timeout_ms} ms is outside \[1, 86400000\]"):
            native.RankHandle(twin.heap, 0, twin.ssc["fwd"][0], twin.ssc["bwd"][0],
                              native.RankOptions(timeout_ms=timeout_ms))


@pytest.mark.parametrize("timeout_s", [float("nan"), -1.0, 0.0, float("inf")])
def test_twin_refuses_a_timeout_that_would_unbound_the_waits(timeout_s):
    cfg, _, _ = case(ep=2)
    with pytest.raises(ConfigError, match="timeout_s must be"):
        CpuTwin(cfg, timeout_s=timeout_s)


def test_op_session_heap_of_a_finished_job_is_stale_a_running_jobs_is_kept(tmp_path):
    """hpmoe.mindspore's heaps are named after the group key, which starts with the job launcher's pid
    (msrun): once that launcher is gone the heap is stale, while it runs the heap is kept."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        tail = "-29500-123456-h7168-i2048-e8-k8-bf16-t8192-s0-C40960"
        names = [f"hpmoe-{dead.pid}{tail}", f"hpmoe-{dead.pid}{tail}-init4242", f"hpmoe-{live.pid}{tail}"]
        for name in names:
            (tmp_path / name).write_bytes(b"\0" * 64)
        (tmp_path / f"hpmoe-{dead.pid}-not-a-session-name").write_bytes(b"")
        assert sorted(remove_stale_segments(tmp_path)) == sorted(names[:2])
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([names[2], f"hpmoe-{dead.pid}-not-a-session-name"])
    finally:
        live.kill()
        live.wait()
