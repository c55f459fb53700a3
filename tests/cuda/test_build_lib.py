"""op_host/cuda/build_lib.sh (the nvcc-only build the GPU machines use) compiles exactly the sources CMake puts
into libhpmoe_cuda and the SSC library it links: a source added to CMake alone once left the GPU build with
an undefined symbol. No GPU or nvcc needed: --sources prints the list."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cmake_target_sources(cmakelists: Path, target: str) -> set[Path]:
    text = cmakelists.read_text()
    body = re.search(rf"add_library\({target}\s+\w+\s+([^)]*)\)", text).group(1)
    out = set()
    for word in body.split():
        word = word.replace("${PROJECT_SOURCE_DIR}", str(ROOT))
        out.add((Path(word) if word.startswith("/") else cmakelists.parent / word).resolve())
    return out


def test_build_lib_sources_are_cmakes():
    listed = subprocess.run(["bash", str(ROOT / "op_host/cuda/build_lib.sh"), "--sources"], check=True,
                            capture_output=True, text=True).stdout.split()
    expected = (cmake_target_sources(ROOT / "op_host/cuda/CMakeLists.txt", "hpmoe_cuda")
                | cmake_target_sources(ROOT / "op_host/CMakeLists.txt", "hpmoe_ssc"))
    assert {Path(p).resolve() for p in listed} == expected
    assert len(listed) == len(expected) and all(Path(p).is_file() for p in listed)
    assert ROOT / "op_host/validate/check_events.cpp" in expected


def test_builds_refuse_a_kernel_whose_wgmma_ptxas_serialised(tmp_path):
    """ptxas's advisory C7514 (wgmma serialised for the whole worker kernel) fails both builds: it once cost
    15-20% of every GMM tile for a session unnoticed."""
    check = ROOT / "op_host/cuda/refuse_serialised_wgmma.sh"
    bad, good = tmp_path / "bad.log", tmp_path / "good.log"
    bad.write_text("ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized\n")
    good.write_text("ptxas info    : Used 255 registers\n")
    refused = subprocess.run(["bash", str(check), str(bad)], capture_output=True, text=True)
    assert refused.returncode == 1 and "C7514" in refused.stderr
    assert subprocess.run(["bash", str(check), str(good)]).returncode == 0
    for script in ("build.sh", "op_host/cuda/build_lib.sh"):
        assert "refuse_serialised_wgmma.sh" in (ROOT / script).read_text(), f"{script} does not run the check"


def test_staged_epilogues_store_whole_vectors():
    """nvcc 13 compiles `*reinterpret_cast<uint4*>(p) = LoadShared16(a)` to four 4-byte stores (PTX st.u32 x4):
    every staged GMM epilogue wrote its tiles that way for sessions (store phase of a weight-gradient tile
    4.5k -> 3.9k cycles once fixed). Staged rows leave through StoreGlobal16 (one st.global.v4)."""
    split = re.compile(r"reinterpret_cast<\s*uint4\s*\*\s*>\([^;]*\)\s*=\s*LoadShared16\(")
    offenders = [f"{p.name}:{i}" for p in sorted((ROOT / "op_kernel/cuda").glob("*.cuh"))
                 for i, line in enumerate(p.read_text().splitlines(), 1) if split.search(line)]
    assert not offenders, f"16-byte stores of staged rows outside StoreGlobal16: {offenders}"
    assert "st.global.v4.u32" in (ROOT / "op_kernel/cuda/dtype.cuh").read_text()
