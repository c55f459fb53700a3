"""The CUDA expert-segment walk (op_kernel/cuda/row_segments.cuh: 32 experts a warp step, a warp scan placing the
segments) against the walk every backend shares (op_kernel/runtime/row_segments.h): the same segments, order and
verdict on every warp, over 3000 random count tables and row ranges, corrupted counts among them
(tests/cuda/segment_walk_check.cu, built by CMake as hpmoe_segment_walk_check)."""
from __future__ import annotations

import pytest

from hpmoe.cuda.native import gpu_count, gpu_unavailable_reason


@pytest.mark.skipif(gpu_count() == 0, reason=gpu_unavailable_reason() or "no GPU")
def test_warp_walk_visits_the_shared_walks_segments_and_verdicts(run_built_check):
    out = run_built_check("hpmoe_segment_walk_check")
    assert "every warp's walk equals the shared walk" in out, out
