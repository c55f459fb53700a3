"""The launcher's watch over its rank processes: a dead or stopped rank is reported within the wait timeout
plus a small margin, however many iterations were asked for.

Every rank bounds each of its own waits by the timeout, so a live rank whose peer stopped or died gives up
within that bound and exits. The launcher polls all ranks together (never one after the other, which would
add one bound per rank) and on the first failure:
  - marks the group failed in the shared heap, so every other worker stops at its next wait instead of
    waiting out its own timeout;
  - kills any rank that is stopped (SIGSTOP, a debugger) or has been for longer than the timeout;
  - gives the remaining ranks GRACE_S to exit on their own, then kills them.
A rank stopped while no peer waits on it (ep 1) is caught by the stopped-for-longer-than-timeout rule.
"""
from __future__ import annotations

import signal
import subprocess
import threading
import time
from typing import Callable

POLL_S = 0.02
GRACE_S = 2.0  # after the group failed: enough for a worker to finish the tile it is computing and exit


def process_state(pid: int) -> str:
    """One-letter state from /proc/<pid>/stat ('T' stopped, 't' traced, 'Z' zombie, ...); '' if unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode(errors="replace")
        return stat[stat.rindex(")") + 2]
    except (OSError, ValueError, IndexError):
        return ""


def _exit_text(rank: int, code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"rank {rank} process died ({name})"
    return f"rank {rank} process died (exit status {code})"


def supervise(procs: list[subprocess.Popen], timeout_s: float, abort_group: Callable[[int], None]) -> list[str]:
    """Waits for every rank process; returns one message per failed rank, the likely cause first."""
    causes: list[str] = []    # ranks that died by a signal, were stopped, or never exited: listed first
    reports: list[str] = []   # the one-line reports of ranks that failed and exited on their own
    stopped_since: dict[int, float] = {}
    failed_at = None
    running = dict(enumerate(procs))
    # Drain every stderr pipe as it fills: a rank writing more than a pipe holds (a sanitizer report) would
    # otherwise block before it exits and look hung.
    errors: dict[int, list[str]] = {r: [] for r in running}
    readers = {r: threading.Thread(target=lambda p=p, out=errors[r]: out.append(p.stderr.read() if p.stderr else ""),
                                   daemon=True) for r, p in running.items()}
    for t in readers.values():
        t.start()

    def fail(rank: int) -> None:
        nonlocal failed_at
        if failed_at is None:
            failed_at = time.monotonic()
            abort_group(rank)

    while running:
        now = time.monotonic()
        for r, p in list(running.items()):
            code = p.poll()
            if code is not None:
                del running[r]
                readers[r].join(timeout=5.0)
                err = "".join(errors[r])
                if code != 0:
                    line = err.strip().splitlines()[-1] if err.strip() else ""
                    if code < 0 or not line:
                        causes.append(_exit_text(r, code))
                    else:
                        reports.append(line)
                    fail(r)
                continue
            if process_state(p.pid) in ("T", "t"):
                since = stopped_since.setdefault(r, now)
                if failed_at is not None or now - since > timeout_s:
                    p.kill()
                    p.wait()
                    del running[r]
                    causes.append(f"rank {r} process was stopped (SIGSTOP or a debugger) for "
                                  f"{now - since:.1f} s; killed")
                    fail(r)
            else:
                stopped_since.pop(r, None)
        if failed_at is not None and running and time.monotonic() - failed_at > GRACE_S:
            for r, p in running.items():
                p.kill()
                p.wait()
                causes.append(f"rank {r} process did not exit within {GRACE_S:.0f} s after the group failed; "
                              f"killed")
            running.clear()
        if running:
            time.sleep(POLL_S)
    return causes + reports


def kill_all(procs: list[subprocess.Popen]) -> None:
    """Kill and reap every rank process still alive (the launcher is leaving: error, SIGTERM, SIGHUP)."""
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
