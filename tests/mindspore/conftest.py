"""MindSpore tests: need MindSpore (./build.sh setup installs it) and the built kernels; otherwise skipped
with the reason."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

if importlib.util.find_spec("mindspore") is None:
    collect_ignore_glob = ["test_*.py", "msrun_worker.py", "ms_cases.py"]
    print("tests/mindspore skipped: MindSpore is not installed (./build.sh setup installs it)", file=sys.stderr)


@pytest.fixture(scope="session", autouse=True)
def built_kernels():
    from hpmoe.mindspore.kernel_library import kernel_library_path
    from hpmoe.runtime import native

    for path in (native.library_path(), kernel_library_path()):
        if not path.exists():
            pytest.skip(f"{path} is not built: run ./build.sh setup")
