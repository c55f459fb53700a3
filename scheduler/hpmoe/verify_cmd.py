"""`hpmoe verify`: the C++ load-time validator every backend's loader runs (op_host/ssc_loader.h, through
runtime/native.py), then the Python schedule validator (validate.py: coverage, write order, deadlock freedom).

A group the C++ validator refuses is reported with its one line and not handed to the Python validator, which
assumes records the loader accepts. Exit status: 0 valid, 2 otherwise (the caller prints the last line).
"""
from __future__ import annotations

import sys
from pathlib import Path

from . import ssc_io
from .errors import HpmoeError, ScheduleError
from .validate import validate


def _native_validate(blobs: list[bytes]) -> str:
    from .runtime import native  # ctypes binding of the C++ library; only `verify` and `run` load it
    error, _ = native.validate_ssc(blobs)
    return error


def verify_files(files: list[str], max_errors: int) -> int:
    if max_errors < 1:
        # 0 would print nothing and could look like a pass; counting only is not offered.
        raise HpmoeError(f"--max-errors {max_errors}: must be at least 1")
    schedules, blobs = [], {}
    for f in files:
        s = ssc_io.read(f)
        schedules.append(s)
        blobs.setdefault(s.direction_name, []).append(Path(f).read_bytes())
    by_direction: dict[str, list] = {}
    for s in schedules:
        by_direction.setdefault(s.direction_name, []).append(s)
    failed = False
    for d, group in sorted(by_direction.items()):
        native_error = _native_validate(blobs[d])
        errors = [f"C++ loader: {native_error}"] if native_error else validate(group, max_errors=max_errors)
        cfg = group[0].cfg
        ranks = sorted(s.rank for s in group)
        scope = "whole group" if ranks == list(range(cfg.ep)) else "rank-local checks"
        for e in errors[:max_errors]:
            print(f"{d}: {e}", file=sys.stderr)
        status = "FAILED" if errors else "ok"
        print(f"{d}: {len(group)} file(s), ranks {ranks} of {cfg.ep}, {scope}: {status}")
        failed |= bool(errors)
    if failed:
        raise ScheduleError("verification failed (violations listed above)")
    return 0
