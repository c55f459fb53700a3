"""Shared fixtures: where the C++ build lives (build.sh sets HPMOE_BUILD_DIR)."""
from __future__ import annotations

import os
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
