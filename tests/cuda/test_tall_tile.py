"""The tall GMM tile (op_kernel/cuda/block_gemm_tall.cuh: 256 x 192 outputs a block, two consumer warpgroups of
128 rows and a TMA producer) against the 128 x 256 tile in the same roles (bitwise) and float64, ragged M, N and
K, both B orders the GMM tasks read (tests/cuda/tall_tile_check.cu, built by CMake as hpmoe_tall_tile_check)."""
from __future__ import annotations

import pytest

from hpmoe.cuda.native import gpu_count, gpu_unavailable_reason


@pytest.mark.skipif(gpu_count() == 0, reason=gpu_unavailable_reason() or "no GPU")
def test_tall_tile_is_bitwise_the_128x256_tile_and_matches_float64(run_built_check):
    out = run_built_check("hpmoe_tall_tile_check")
    for order in ("MN-major B (GMM)", "K-major B (GMM_TRANS_B)"):
        for shape in ("M 300 N 520 K 600", "M 40 N 136 K 56"):
            for epilogue in ("staged", "direct"):
                line = f"tall tile {order}, {epilogue} epilogue, {shape}: bitwise equal to the 128 x 256 tile yes"
                assert line in out, out
