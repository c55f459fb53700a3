"""AscendC-on-CPU tests need libhpmoe_ascendc_cpu.so (built by ./build.sh) and the CPU twin's library."""
from __future__ import annotations

import pytest

from hpmoe.runtime import native


@pytest.fixture(scope="session", autouse=True)
def ascendc_cpu_library():
    for backend in ("cpu", "ascendc-cpu"):
        native.use_backend(backend)
        if not native.library_path().exists():
            native.use_backend("cpu")
            pytest.skip(f"{backend} library not built at {native.library_path()}: run ./build.sh test")
    native.use_backend("cpu")
