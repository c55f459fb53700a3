"""The CUDA expert-segment walk (op_kernel/cuda/row_segments.cuh: 32 experts a warp step, a warp scan placing the
segments) against the walk every backend shares (op_kernel/runtime/row_segments.h): the same segments, order and
verdict on every warp, over 3000 random count tables and row ranges, corrupted counts among them
(tests/cuda/segment_walk_check.cu, built by CMake as hpmoe_segment_walk_check)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hpmoe.cuda.native import gpu_count, gpu_unavailable_reason

ROOT = Path(__file__).resolve().parents[2]
CHECK = Path(os.environ.get("HPMOE_BUILD_DIR", ROOT / "build")) / "op_host/cuda/hpmoe_segment_walk_check"


@pytest.mark.skipif(gpu_count() == 0, reason=gpu_unavailable_reason() or "no GPU")
def test_warp_walk_visits_the_shared_walks_segments_and_verdicts():
    if not CHECK.is_file():
        pytest.skip(f"{CHECK} is not built (CMake builds it where nvcc is found)")
    res = subprocess.run([str(CHECK)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "every warp's walk equals the shared walk" in res.stdout, res.stdout
