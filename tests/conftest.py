"""Shared fixtures: where the C++ build lives (build.sh sets HPMOE_BUILD_DIR)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "golden"))


@pytest.fixture(scope="session")
def build_dir() -> Path:
    path = Path(os.environ.get("HPMOE_BUILD_DIR", ROOT / "build"))
    if not (path / "op_host" / "hpmoe_ssc_dump").exists():
        pytest.skip(f"C++ tools not built in {path}: run ./build.sh test")
    return path


@pytest.fixture(scope="session")
def layout_probe(build_dir) -> dict[str, int]:
    """What op_kernel/ssc_layout.h and runtime/task_access.h say, as the C++ probe prints it."""
    out = subprocess.run([str(build_dir / "op_host" / "hpmoe_ssc_layout_probe")], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)
