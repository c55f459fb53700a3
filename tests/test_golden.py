"""Golden SSC files: the writer reproduces them byte for byte, and the Python and C++ readers agree on them."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hpmoe import ssc_io
from hpmoe.inspect_ssc import to_json
from make_golden import GOLDEN_FILES, golden_name, golden_schedule

GOLDEN = Path(__file__).resolve().parent / "golden"
CASES = [pytest.param(*case, id=golden_name(*case)) for case in GOLDEN_FILES]


@pytest.mark.parametrize("ep,rank,direction,flags", CASES)
def test_writer_reproduces_golden_bytes(ep, rank, direction, flags):
    name = golden_name(ep, rank, direction, flags)
    fresh = ssc_io.to_bytes(golden_schedule(ep, rank, direction, flags))
    golden = (GOLDEN / f"{name}.ssc").read_bytes()
    if fresh != golden:
        first = next(i for i in range(min(len(fresh), len(golden))) if fresh[i] != golden[i]) \
            if len(fresh) == len(golden) else min(len(fresh), len(golden))
        pytest.fail(f"{name}: compiled SSC differs from golden at byte {first} ({len(fresh)} vs {len(golden)} "
                    f"bytes); if the change is intended run tests/golden/make_golden.py and say so in the commit")


@pytest.mark.parametrize("ep,rank,direction,flags", CASES)
def test_python_reader_matches_golden_json(ep, rank, direction, flags):
    name = golden_name(ep, rank, direction, flags)
    parsed = to_json(ssc_io.read(GOLDEN / f"{name}.ssc"))
    assert parsed == json.loads((GOLDEN / f"{name}.json").read_text()), name


@pytest.mark.parametrize("ep,rank,direction,flags", CASES)
def test_cpp_reader_matches_golden_json(build_dir, ep, rank, direction, flags):
    name = golden_name(ep, rank, direction, flags)
    out = subprocess.run([str(build_dir / "op_host" / "hpmoe_ssc_dump"), str(GOLDEN / f"{name}.ssc")],
                         check=True, capture_output=True, text=True).stdout
    assert json.loads(out) == json.loads((GOLDEN / f"{name}.json").read_text()), name


def test_cpp_reader_rejects_damage_with_one_line(build_dir, tmp_path):
    data = bytearray((GOLDEN / "small_ep2_rank0.fwd.ssc").read_bytes())
    data[len(data) // 3] ^= 0xFF
    bad = tmp_path / "bad.ssc"
    bad.write_bytes(bytes(data))
    proc = subprocess.run([str(build_dir / "op_host" / "hpmoe_ssc_dump"), str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "checksum" in proc.stderr, proc.stderr
