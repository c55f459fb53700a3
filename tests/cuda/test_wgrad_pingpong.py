"""The ping-pong weight-gradient unit (op_kernel/cuda/block_gemm_pingpong.cuh: 128 x 128 tiles owned in turns
by the two warpgroups) against the default tile (bitwise) and float64, over ragged and empty K segments, one K
step a tile, odd tile counts and ragged rows and columns (tests/cuda/wgrad_pingpong_check.cu, built by CMake as
hpmoe_wgrad_pingpong_check)."""
from __future__ import annotations

import pytest

from hpmoe.cuda.native import gpu_count, gpu_unavailable_reason

CASES = ("3 slots (one empty), ragged K, 8 tiles", "one K step a tile", "3 steps, 7 tiles, ragged rows and columns",
         "K tails of whole k16 groups", "one tile")


@pytest.mark.skipif(gpu_count() == 0, reason=gpu_unavailable_reason() or "no GPU")
def test_pingpong_unit_is_bitwise_the_default_tile_and_matches_float64(run_built_check):
    out = run_built_check("hpmoe_wgrad_pingpong_check", timeout=300)
    for case in CASES:
        assert f"wgrad ping-pong {case}: bitwise equal to the default tile yes" in out, out
