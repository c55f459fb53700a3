"""The paired TMA tile (op_kernel/cuda/block_gemm_paired.cuh: two blocks of a cluster on one B tile, each
loading half of it with TMA multicast) against the same tile run solo (bitwise) and float64, for both B orders
the GMM tasks read (tests/cuda/paired_tile_check.cu, built by CMake as hpmoe_paired_tile_check, and with
HPMOE_GEMM_WS=2 as hpmoe_ws_paired_tile_check: the tiles in the roles of the whole launch, a producer warpgroup
per block owning the refills)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hpmoe.cuda.native import gpu_count, gpu_unavailable_reason

ROOT = Path(__file__).resolve().parents[2]
CHECKS = Path(os.environ.get("HPMOE_BUILD_DIR", ROOT / "build")) / "op_host/cuda"


@pytest.mark.skipif(gpu_count() == 0, reason=gpu_unavailable_reason() or "no GPU")
@pytest.mark.parametrize("binary", ["hpmoe_paired_tile_check", "hpmoe_ws_paired_tile_check"])
def test_paired_tile_is_bitwise_the_solo_tile_and_matches_float64(binary):
    check = CHECKS / binary
    if not check.is_file():
        pytest.skip(f"{check} is not built (CMake builds it where nvcc is found)")
    res = subprocess.run([str(check)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    for order in ("MN-major B (GMM)", "K-major B (GMM_TRANS_B)"):
        assert f"paired tile {order}: bitwise equal to solo yes" in res.stdout, res.stdout
