"""The op package build (op_host/ascend/package/build_package.sh; it needs CANN, so CI checks its inputs): the
default SoC is the A3 (ascend910_93), and the kernel's whole include closure lies in what the script copies
into the package's op_kernel/ (a CANN kernel compile sees only that tree)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "op_host/ascend/package/build_package.sh"
STUB = ROOT / "op_kernel/ascend/stub"


def _kernel_closure() -> set[Path]:
    """Files the kernel includes by relative path, recursively; the AscendC headers (the stubs here, CANN's
    on the NPU build) are not followed."""
    seen, todo = set(), [ROOT / "op_kernel/ascend/hyper_parallel_moe.cpp"]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        for inc in re.findall(r'^#include "([^"]+)"', f.read_text(), re.M):
            local = (f.parent / inc).resolve()
            if local.exists() and STUB not in local.parents:
                todo.append(local)
            elif not (STUB / inc).exists():
                raise AssertionError(f"{f.relative_to(ROOT)} includes {inc}, found neither beside it nor in the stubs")
    return seen


def _copied(patterns: str) -> set[Path]:
    out = set()
    for p in patterns.split():
        for f in ROOT.glob(p):
            out |= set(f.rglob("*")) if f.is_dir() else {f}
    return {f.resolve() for f in out}


def test_default_soc_is_a3():
    assert re.search(r"^SOC=\$\{2:-ai_core-ascend910_93\}$", SCRIPT.read_text(), re.M)


def test_kernel_sources_lie_inside_the_packages_op_kernel():
    m = re.search(r'^KERNEL_SOURCES="([^"]+)"$', SCRIPT.read_text(), re.M)
    assert m, "build_package.sh names the kernel's sources in KERNEL_SOURCES"
    missing = sorted(str(f.relative_to(ROOT)) for f in _kernel_closure() - _copied(m.group(1)))
    assert not missing, f"the kernel includes files the package's op_kernel/ would not have: {missing}"
