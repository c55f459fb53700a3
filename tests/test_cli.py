"""The hpmoe command line: help, one-line errors with exit code 2, compile/inspect/verify round trips."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hpmoe import ssc_io
from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config


def hpmoe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpmoe.cli", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", [[], ["compile"], ["inspect"], ["verify"], ["run"], ["simulate"], ["tune"]])
def test_every_command_has_help(command):
    proc = hpmoe(*command, "--help")
    assert proc.returncode == 0 and "usage: hpmoe" in proc.stdout, proc.stderr


def test_python_dash_m_hpmoe_is_the_same_cli(tmp_path):
    """`python -m hpmoe` (machines with the package on PYTHONPATH, not installed) runs hpmoe.cli's main, exit
    codes included."""
    ok = subprocess.run([sys.executable, "-m", "hpmoe", "tune", "--help"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "usage: hpmoe tune" in ok.stdout, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "hpmoe", "compile", "--preset", "nope", "-o", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "unknown preset 'nope'" in bad.stderr, bad.stderr


@pytest.mark.parametrize("args,needle", [
    (["--preset", "nope"], "unknown preset 'nope'"),
    (["--preset", "small", "--topk", "9"], "topk=9 is larger than the number of experts"),
    (["--preset", "small", "--ep", "0"], "--ep: must be a positive integer"),
    (["--preset", "small", "--hidden", "70"], "hidden=70 is not divisible by wgrad_tile=16"),
    (["--preset", "small", "--rank", "4"], "--rank 4 is outside the EP group of 4 ranks"),
    (["--ep", "2"], "missing config field"),
])
def test_bad_config_is_one_line_and_exit_2(tmp_path, args, needle):
    proc = hpmoe("compile", *args, "-o", str(tmp_path))
    assert proc.returncode == 2, proc.stdout
    assert needle in proc.stderr and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr


def test_compile_inspect_verify(tmp_path):
    proc = hpmoe("compile", "--preset", "small", "--ep", "3", "--direction", "both", "-o", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    lines = [l for l in proc.stdout.splitlines() if l.startswith("rank ")]
    assert len(lines) == 6 and all("CTQ" in l and "VTQ" in l and "events" in l and "bytes" in l for l in lines)
    files = sorted(str(p) for p in tmp_path.glob("*.ssc"))
    assert len(files) == 6
    verify = hpmoe("verify", *files)
    assert verify.returncode == 0 and verify.stdout.count("whole group: ok") == 2, verify.stdout + verify.stderr
    dump = json.loads(hpmoe("inspect", "--json", str(tmp_path / "rank2.bwd.ssc")).stdout)
    assert dump["rank"] == 2 and dump["direction"] == "bwd" and dump["config"]["ep"] == 3
    summary = hpmoe("inspect", str(tmp_path / "rank0.fwd.ssc")).stdout
    assert "tasks by type" in summary and "DISPATCH_PUT" in summary


def test_verify_reports_damage_and_mixed_groups(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert hpmoe("compile", "--preset", "small", "--ep", "2", "--direction", "fwd", "-o", str(a)).returncode == 0
    assert hpmoe("compile", "--preset", "small", "--ep", "2", "--hidden", "96", "--direction", "fwd",
                 "-o", str(b)).returncode == 0
    mixed = hpmoe("verify", str(a / "rank0.fwd.ssc"), str(b / "rank1.fwd.ssc"))
    assert mixed.returncode == 2 and "config or direction differs" in mixed.stderr
    data = bytearray((a / "rank0.fwd.ssc").read_bytes())
    data[300] ^= 1
    (a / "rank0.fwd.ssc").write_bytes(bytes(data))
    damaged = hpmoe("verify", str(a / "rank0.fwd.ssc"))
    assert damaged.returncode == 2 and "checksum mismatch" in damaged.stderr and damaged.stderr.count("\n") == 1
    missing = hpmoe("inspect", str(tmp_path / "none.ssc"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr


# The last two: the CUDA op's schedules (mixed queues, row pipelines, the claim pool), whose processes each
# compile only their own rank and exchange the files (hpmoe.torch's runtime).
@pytest.mark.parametrize("overrides", [{"ep": 2}, {"ep": 3}, {"ep": 5, "topk": 4}, {"ep": 4, "topk": 8},
                                       {"ep": 4, "ratr": False, "interleave": False}, {"ep": 3, "hidden": 48},
                                       {"ep": 4, "mixed_queues": True, "row_pipelines": True, "claim_pool": True},
                                       {"ep": 8, "topk": 4, "mixed_queues": True, "row_pipelines": True,
                                        "claim_pool": True, "expert_aligned": True}])
def test_single_rank_compile_equals_the_group_compile(overrides):
    """The single-rank path derives remote triggers by rank symmetry; the group path derives every trigger."""
    cfg = make_config("small", overrides)
    group = compile_schedules(cfg, ["fwd", "bwd"], list(range(cfg.ep)))
    for rank in range(cfg.ep):
        alone = compile_schedules(cfg, ["fwd", "bwd"], [rank])
        for one in alone:
            twin = next(s for s in group if s.rank == rank and s.direction == one.direction)
            assert ssc_io.to_bytes(one) == ssc_io.to_bytes(twin), f"rank {rank} {one.direction_name} {overrides}"


def test_subset_of_ranks_compile_equals_the_group_compile():
    cfg = make_config("small", {"ep": 5, "topk": 3})
    group = compile_schedules(cfg, ["fwd", "bwd"], list(range(cfg.ep)))
    subset = compile_schedules(cfg, ["fwd", "bwd"], [1, 3])
    for one in subset:
        twin = next(s for s in group if s.rank == one.rank and s.direction == one.direction)
        assert ssc_io.to_bytes(one) == ssc_io.to_bytes(twin), f"rank {one.rank} {one.direction_name}"


def test_single_rank_compile_of_deepseek_equals_group():
    cfg = make_config("deepseek-v3", {"ep": 4})
    group = compile_schedules(cfg, ["bwd"], list(range(cfg.ep)))
    (alone,) = compile_schedules(cfg, ["bwd"], [3])
    assert ssc_io.to_bytes(alone) == ssc_io.to_bytes(group[3])
