"""HPMOE_TEST_MPS=1 (the CUDA MPS daemon runs): only the tests whose ranks are processes sharing one GPU run.
Under MPS the in-process tests whose ranks share a GPU (one stream per rank) time out: MPS does not keep
one process's cooperative kernels on different streams co-resident (seen on an H200, 2026-11-24), and
they need no MPS: run them without it."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

MPS_TESTS = ("ranks_sharing", "ranks-sharing")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_built_check():
    """Runs one of the GPU check programs CMake builds beside the CUDA library (op_host/cuda under
    $HPMOE_BUILD_DIR, else build/): skips where it is not built, asserts it exited 0, returns its stdout."""
    def run(binary: str, timeout: float = 120) -> str:
        check = Path(os.environ.get("HPMOE_BUILD_DIR", ROOT / "build")) / "op_host/cuda" / binary
        if not check.is_file():
            pytest.skip(f"{check} is not built (CMake builds it where nvcc is found)")
        res = subprocess.run([str(check)], capture_output=True, text=True, timeout=timeout)
        assert res.returncode == 0, res.stdout + res.stderr
        return res.stdout
    return run


def pytest_collection_modifyitems(config, items):
    if os.environ.get("HPMOE_TEST_MPS") != "1":
        return
    skip = pytest.mark.skip(reason="HPMOE_TEST_MPS=1 runs only the shared-GPU process tests (run the rest without "
                                   "MPS: in-process ranks sharing a GPU are not co-resident under it)")
    for item in items:
        if not any(tag in item.nodeid for tag in MPS_TESTS):
            item.add_marker(skip)
