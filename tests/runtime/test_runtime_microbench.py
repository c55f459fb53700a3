"""The SwiGLU + Add microbenchmark binary (benchmarks/microbench): one tiny run in every mode must give
bitwise-identical outputs across the compute modes, equal to a numpy reference; bad arguments exit 2 with
one line. Never asserts speed (benchmarks are not timed tests).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from hpmoe.runtime.dtypes import round_trip, to_float64

REPO = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("HPMOE_BUILD_DIR", REPO / "build")) / "benchmarks" / "microbench" / \
    "hpmoe_microbench_swiglu_add"
INTER = 2048
COMPUTE_MODES = ["serial", "interleaved", "dynamic", "dynamic-lifo"]
ALL_MODES = COMPUTE_MODES + ["noop-static", "noop-dynamic", "noop-dynamic-lifo"]

# Normwise relative error max|got - ref| / max|ref| of Y against a float64 reference fed the same stored
# inputs. u = unit roundoff.
#   fp32: the twin rounds 6 times in fp32 on the way to Y (expf <= 1 ulp = 2u, 1 + e, the divide, two
#         multiplies, the add): <= 7u normwise when max|A| ~ max|Y|; 16u leaves 2x for max|A| / max|Y| > 1.
#   bf16: A and Y are stored in bf16 on both sides; fp32 vs float64 math can put A and then Y on the other
#         side of a rounding boundary, one ulp (2u) each: <= 4u; 6u for the fp32 noise on top.
U = {"fp32": 2.0 ** -24, "bf16": 2.0 ** -8}
TOLERANCE = {"fp32": 16 * U["fp32"], "bf16": 6 * U["bf16"]}


def run(*args: str) -> subprocess.CompletedProcess:
    assert BINARY.exists(), f"{BINARY} is not built: run ./build.sh test"
    return subprocess.run([str(BINARY), *args], capture_output=True, text=True, timeout=120)


def load(path: Path, dtype: str, cols: int) -> np.ndarray:
    raw = np.fromfile(path, np.uint16 if dtype == "bf16" else np.float32)
    return to_float64(raw, dtype).reshape(-1, cols)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_every_mode_runs_and_compute_modes_match_numpy_bitwise_identical(tmp_path: Path, dtype: str):
    rows, tile = 100, 32  # 4 tiles, the last one 4 rows
    res = run("--m", str(rows), "--tile-rows", str(tile), "--workers", "2", "--dtype", dtype, "--repeats", "1",
              "--warmup", "0", "--json", "--dump", str(tmp_path))
    assert res.returncode == 0, res.stderr
    point = json.loads(res.stdout.strip())
    assert point["m"] == rows and point["tiles"] == 4 and point["tasks"] == 8 and point["dtype"] == dtype
    assert point["identical"] is True
    assert sorted(point["modes"]) == sorted(ALL_MODES)
    for mode, stats in point["modes"].items():
        assert len(stats["samples_us"]) == 1 and stats["median_us"] > 0, mode

    prefix = tmp_path / f"m{rows}."
    outputs = {m: (prefix.parent / f"{prefix.name}y.{m}.bin").read_bytes() for m in COMPUTE_MODES}
    for mode in COMPUTE_MODES[1:]:
        assert outputs[mode] == outputs["serial"], f"{mode} differs from serial"

    h = load(prefix.parent / f"{prefix.name}h.bin", dtype, 2 * INTER)
    x = load(prefix.parent / f"{prefix.name}x.bin", dtype, INTER)
    assert h.shape == (rows, 2 * INTER) and x.shape == (rows, INTER)
    assert np.isfinite(h).all() and np.abs(h).max() <= 4 and np.abs(x).max() <= 1
    g, u = h[:, :INTER], h[:, INTER:]
    a = round_trip(g / (1.0 + np.exp(-g)) * u, dtype)
    ref = round_trip(a + x, dtype)
    got = load(prefix.parent / f"{prefix.name}y.serial.bin", dtype, INTER)
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert err <= TOLERANCE[dtype], f"{dtype}: normwise error {err:.3e} > {TOLERANCE[dtype]:.3e}"


def test_outputs_do_not_depend_on_workers_or_tile_order(tmp_path: Path):
    hashes = set()
    for workers in ("1", "3"):
        res = run("--m", "70", "--tile-rows", "16", "--workers", workers, "--repeats", "1", "--warmup", "0",
                  "--modes", "serial,interleaved,dynamic", "--json")
        assert res.returncode == 0, res.stderr
        point = json.loads(res.stdout)
        assert point["identical"] is True
        hashes.add(point["hash"])
    assert len(hashes) == 1


@pytest.mark.parametrize("args", [
    ["--tile-rows", "0"], ["--m", "2K,x"], ["--dtype", "fp64"], ["--modes", "serial,nope"],
    ["--modes", "serial,serial"], ["--bogus"], ["--workers"], ["stray"], ["--dump", "/nonexistent/dir"],
])
def test_bad_arguments_exit_2_with_one_line(args: list[str]):
    res = run(*args)
    assert res.returncode == 2
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hpmoe_microbench_swiglu_add: error: "), res.stderr


def test_help_lists_every_mode():
    res = run("--help")
    assert res.returncode == 0
    for mode in ALL_MODES:
        assert f"  {mode} " in res.stdout
