"""Runtime tests need the CPU twin library (built by ./build.sh)."""
from __future__ import annotations

import pytest

from hpmoe.runtime import native


@pytest.fixture(scope="session", autouse=True)
def cpu_twin_library():
    if not native.library_path().exists():
        pytest.skip(f"CPU twin not built at {native.library_path()}: run ./build.sh test")
