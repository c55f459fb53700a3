"""benchmarks/user_step_table.py (torch-free): merging one-shape runs of cuda_user_step.py into one table and
one JSON, and refusing files of different commits or devices."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))
import user_step_table  # noqa: E402

ROW = dict(shape="dbrx", tokens=4096, routing="random", torch_fwdbwd_ms=40.22, hpmoe_fwdbwd_ms=49.53,
           same_call_kernels_ms=44.80, ratio_user_fwdbwd=40.22 / 49.53, ratio_kernels_fwdbwd=40.22 / 44.80,
           user_over_kernels=49.53 / 44.80, ratio_user_fwd=0.85, gmm_ratio=0.68)


def write(path: Path, rows, commit="8a0f7a8", device="NVIDIA H200") -> Path:
    path.write_text(json.dumps({"commit": commit, "device": device, "rows": rows}))
    return path


def test_merge_keeps_every_row_in_file_order(tmp_path):
    a = write(tmp_path / "a.json", [ROW])
    b = write(tmp_path / "b.json", [{**ROW, "shape": "olmoe-1b-7b"}, {**ROW, "shape": "gpt-oss-20b"}])
    merged = user_step_table.merge([a, b])
    assert [r["shape"] for r in merged["rows"]] == ["dbrx", "olmoe-1b-7b", "gpt-oss-20b"]
    assert (merged["commit"], merged["device"]) == ("8a0f7a8", "NVIDIA H200")


def test_table_rounds_as_the_results_do():
    lines = user_step_table.table([ROW]).splitlines()
    assert lines[0] == user_step_table.HEADER and len(lines) == 3
    assert lines[2] == "| dbrx 4096 random | 40.22 ms | 49.53 ms | 44.80 ms | 0.81 | 0.90 | 1.106 | 0.85 | 0.68 |"


def test_files_of_different_commits_are_refused(tmp_path):
    a = write(tmp_path / "a.json", [ROW])
    b = write(tmp_path / "b.json", [ROW], commit="dd1d887")
    with pytest.raises(ValueError, match="different commits"):
        user_step_table.merge([a, b])


def test_cli_writes_the_merged_json_and_names_a_missing_file(tmp_path):
    a = write(tmp_path / "a.json", [ROW])
    out = tmp_path / "all.json"
    run = subprocess.run([sys.executable, str(BENCH / "user_step_table.py"), str(a), "--json-out", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0 and "| dbrx 4096 random |" in run.stdout
    assert json.loads(out.read_text())["rows"] == [ROW]
    run = subprocess.run([sys.executable, str(BENCH / "user_step_table.py"), str(tmp_path / "none.json")],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "no such file" in run.stderr
