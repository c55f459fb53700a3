"""The paired TMA tile (op_kernel/cuda/block_gemm_paired.cuh: two blocks of a cluster on one B tile, each
loading half of it with TMA multicast) against the same tile run solo (bitwise) and float64, for both B orders
the GMM tasks read (tests/cuda/paired_tile_check.cu, built by CMake as hpmoe_paired_tile_check, and with
HPMOE_GEMM_WS=2 as hpmoe_ws_paired_tile_check: the tiles in the roles of the whole launch, a producer warpgroup
per block owning the refills)."""
from __future__ import annotations

import pytest

from hpmoe.cuda.native import gpu_count, gpu_unavailable_reason


@pytest.mark.skipif(gpu_count() == 0, reason=gpu_unavailable_reason() or "no GPU")
@pytest.mark.parametrize("binary", ["hpmoe_paired_tile_check", "hpmoe_ws_paired_tile_check"])
def test_paired_tile_is_bitwise_the_solo_tile_and_matches_float64(binary, run_built_check):
    out = run_built_check(binary)
    for order in ("MN-major B (GMM)", "K-major B (GMM_TRANS_B)"):
        assert f"paired tile {order}: bitwise equal to solo yes" in out, out
