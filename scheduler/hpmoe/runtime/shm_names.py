"""Names of the CPU twin's POSIX shared-memory segments, and removal of the ones their launcher left behind.

A segment is named `hpmoe-<launcher pid>-<random>`. The launcher removes it on every exit it can see (normal
return, error, Ctrl-C, SIGTERM, SIGHUP); only SIGKILL (or a crash of the interpreter) leaves one behind. An
op session's heap (`hpmoe.mindspore` under msrun) is named after its group key, which starts with the pid of
the job's launcher (msrun, the parent of every rank): `hpmoe-<msrun pid>-<port>-<group>-h..-C<bucket>`, and
`...-init<pid>` while rank 0 fills it; rank 0 removes it when the session closes, a killed job leaves it.
The next launcher, or the next session's rank 0, removes those: a segment whose owner pid no longer runs, or runs a process that started after
the segment was last modified (the pid was reused), is stale. Segments of live launchers, including other
users' and other engineers' concurrent runs, are never touched.
"""
from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

SHM_DIR = Path("/dev/shm")
PREFIX = "hpmoe-"
_NAME = re.compile(r"^hpmoe-(\d+)-[0-9a-f]{8}$")  # exactly what segment_name makes
# What op_session names after a group key (mindspore_ext/group.py, host_state.py): owner = the job launcher.
_SESSION_NAME = re.compile(r"^hpmoe-(\d+)-\d+-\d+-h\d+-i\d+-e\d+-k\d+-\w+-t\d+-s\d+-C\d+(-init\d+)?$")


def segment_name(pid: int | None = None) -> str:
    return f"{PREFIX}{os.getpid() if pid is None else pid}-{uuid.uuid4().hex[:8]}"


def owner_pid(name: str) -> int | None:
    m = _NAME.match(name) or _SESSION_NAME.match(name)
    return int(m.group(1)) if m else None


def _start_time(pid: int) -> float | None:
    """Wall-clock start of a process from /proc (None where that cannot be read)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])  # field 22, counted after "pid (comm)"
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def owner_alive(pid: int, segment_mtime: float) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive, and not ours to judge
    started = _start_time(pid)
    # btime has a one-second resolution: only a start clearly after the segment proves a reused pid.
    return started is None or started <= segment_mtime + 2.0


def remove_stale_segments(shm_dir: Path = SHM_DIR) -> list[str]:
    """Unlink every hpmoe segment whose launcher is dead; returns the names removed."""
    removed = []
    try:
        entries = list(shm_dir.iterdir())
    except OSError:
        return removed
    for path in entries:
        pid = owner_pid(path.name)
        if pid is None:
            continue
        try:
            mtime = path.stat().st_mtime
            if owner_alive(pid, mtime):
                continue
            path.unlink()
            removed.append(path.name)
        except OSError:  # gone meanwhile, or not ours to remove
            continue
    return removed
