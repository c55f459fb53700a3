"""HyperParallelMoEFFN in one process (EP 1) against float64 numpy and the standard MindSpore path, in
PyNative and GRAPH mode; T = 45 is not a multiple of any tile (tiles are 16 rows)."""
from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pytest

import mindspore as ms
from mindspore import Tensor

from hpmoe.mindspore import HyperParallelMoEFFN
from hpmoe.mindspore.reference import ReferenceMoEFFN
from ms_cases import MS_DTYPES, errors, float64_reference, group_inputs, run_cell, run_standard

T, H, I, E, K = 45, 32, 16, 4, 2
MODES = {"pynative": ms.PYNATIVE_MODE, "graph": ms.GRAPH_MODE}
CASES = [("pynative", d, r) for d in ("fp32", "fp16", "bf16") for r in ("balanced", "skewed", "empty")] + \
        [("graph", "fp32", "skewed"), ("graph", "fp16", "balanced"), ("graph", "bf16", "empty")]


@pytest.fixture(autouse=True)
def cpu_context():
    ms.set_context(device_target="CPU", mode=ms.PYNATIVE_MODE)
    yield


@pytest.mark.parametrize("mode, dtype, routing", CASES)
def test_matches_float64_and_standard_path(mode, dtype, routing):
    ms.set_context(mode=MODES[mode])
    inputs = group_inputs(1, T, H, I, E, K, routing, dtype, seed=3)
    cell = HyperParallelMoEFFN(H, I, E, K, dtype=MS_DTYPES[dtype])
    got = run_cell(cell, inputs, 0, dtype)
    standard = run_standard(ReferenceMoEFFN(E, K), inputs, 0, dtype)
    for name, (err, tol) in errors(got, float64_reference(inputs, 0), dtype).items():
        assert err <= tol, f"{mode} {dtype} {routing}: {name} vs float64: {err:.2e} > {tol:.1e}"
    for name, (err, tol) in errors(got, standard, dtype).items():
        assert err <= tol, f"{mode} {dtype} {routing}: {name} vs standard path: {err:.2e} > {tol:.1e}"


@pytest.mark.parametrize("mode", ["pynative", "graph"])
def test_repeated_calls_are_bitwise_identical(mode):
    ms.set_context(mode=MODES[mode])
    inputs = group_inputs(1, T, H, I, E, K, "random", "fp32", seed=5)
    cell = HyperParallelMoEFFN(H, I, E, K)
    first = run_cell(cell, inputs, 0, "fp32")
    for _ in range(2):
        again = run_cell(cell, inputs, 0, "fp32")
        for name in first:
            assert np.array_equal(first[name], again[name]), name


def test_bucket_grows_on_overflow_and_logs_once(caplog):
    # capacity_factor 0.5: the first bucket holds half of the T*k rows EP 1 always sends itself.
    inputs = group_inputs(1, T, H, I, E, K, "skewed", "fp32", seed=1)
    cell = HyperParallelMoEFFN(H, I, E, K, capacity_factor=0.5)
    with caplog.at_level(logging.WARNING, logger="hpmoe"):
        got = run_cell(cell, inputs, 0, "fp32")
        run_cell(cell, inputs, 0, "fp32")
    growth = [r.message for r in caplog.records if "growing the bucket" in r.message]
    assert len(growth) == 1 and f"needs {T * K} rows" in growth[0], growth
    for name, (err, tol) in errors(got, float64_reference(inputs, 0), "fp32").items():
        assert err <= tol, name


def _call(cell, x, ids, w):
    return cell(Tensor(x), Tensor(ids), Tensor(w))


@pytest.mark.parametrize("what, message", [
    ("x_shape", r"x must have shape \[T, 32\], got \[45, 31\]"),
    ("ids_dtype", r"topk_ids must have dtype Int32"),
    ("ids_shape", r"topk_ids must have shape \[45, 2\], got \[45, 3\]"),
    ("x_dtype", r"x must have dtype Float32"),
])
def test_bad_shapes_and_dtypes_are_refused_before_anything_runs(what, message):
    cell = HyperParallelMoEFFN(H, I, E, K)
    x = np.zeros((T, H), np.float32)
    ids = np.zeros((T, K), np.int32)
    ids[:, 1] = 1
    w = np.ones((T, K), np.float32)
    if what == "x_shape":
        x = x[:, :31]
    elif what == "ids_dtype":
        ids = ids.astype(np.float32)
    elif what == "ids_shape":
        ids = np.zeros((T, 3), np.int32)
    else:
        x = x.astype(np.float16)
    with pytest.raises(ValueError, match=message):
        _call(cell, x, ids, w)


@pytest.mark.parametrize("bad, message", [(E, r"topk_ids must lie in \[0, 4\)"), (-1, r"topk_ids must lie in"),
                                          ("dup", r"topk_ids row 7 names one expert twice")])
def test_bad_ids_are_refused_before_anything_runs(bad, message):
    cell = HyperParallelMoEFFN(H, I, E, K)
    ids = np.stack([np.arange(K)] * T).astype(np.int32)
    if bad == "dup":
        ids[7] = [2, 2]
    else:
        ids[7, 1] = bad
    with pytest.raises(Exception, match=message):
        _call(cell, np.ones((T, H), np.float32), ids, np.ones((T, K), np.float32)).asnumpy()


def test_construction_arguments_are_checked():
    with pytest.raises(ValueError, match="topk=9 is larger than the number of experts"):
        HyperParallelMoEFFN(H, I, E, 9)
    with pytest.raises(ValueError, match="hidden_size must be a positive integer"):
        HyperParallelMoEFFN(0, I, E, K)
    with pytest.raises(ValueError, match="dtype must be one of"):
        HyperParallelMoEFFN(H, I, E, K, dtype=ms.int32)


def test_ascend_without_the_op_package_fails_with_one_line(monkeypatch):
    from hpmoe.errors import HpmoeError
    from hpmoe.mindspore.ascend import require_ascend_op

    monkeypatch.setenv("ASCEND_CUSTOM_OPP_PATH", "/nonexistent")
    with pytest.raises(HpmoeError, match="aclnnHyperParallelMoe is not installed: build and install"):
        require_ascend_op()


def test_import_hpmoe_does_not_import_mindspore():
    code = "import sys, hpmoe, hpmoe.runtime, hpmoe.cli; print('mindspore' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _compile(tmp_path, dtype, capacity):
    from hpmoe.cli import main as hpmoe_main

    assert hpmoe_main(["compile", "--ep", "1", "--tokens", str(T), "--hidden", str(H), "--inter", str(I),
                       "--experts-per-rank", str(E), "--topk", str(K), "--dtype", dtype, "--tile-m", "16",
                       "--workers-aic", "1", "--workers-aiv", "1", "--recv-rows-per-src", str(capacity),
                       "--all-ranks", "--direction", "both", "-o", str(tmp_path)]) == 0


def test_ssc_dir_from_hpmoe_compile_is_used(tmp_path):
    _compile(tmp_path, "fp32", 96)  # T*k = 90 rows fit
    inputs = group_inputs(1, T, H, I, E, K, "random", "fp32", seed=8)
    cell = HyperParallelMoEFFN(H, I, E, K, ssc_dir=str(tmp_path))
    got = run_cell(cell, inputs, 0, "fp32")
    assert cell.state.session(T).active.bucket.source.startswith("pinned ")
    for name, (err, tol) in errors(got, float64_reference(inputs, 0), "fp32").items():
        assert err <= tol, name


def test_pinned_bucket_overflow_names_the_bucket_it_needs(tmp_path):
    _compile(tmp_path, "fp32", 48)
    cell = HyperParallelMoEFFN(H, I, E, K, ssc_dir=str(tmp_path))
    ids = np.stack([np.arange(K)] * T).astype(np.int32)
    with pytest.raises(Exception, match=r"hold C=48; compile with --recv-rows-per-src 96"):
        _call(cell, np.ones((T, H), np.float32), ids, np.ones((T, K), np.float32)).asnumpy()


def test_mismatched_ssc_dir_is_refused(tmp_path):
    _compile(tmp_path, "fp16", 96)
    cell = HyperParallelMoEFFN(H, I, E, K, ssc_dir=str(tmp_path))  # fp32 cell
    ids = np.stack([np.arange(K)] * T).astype(np.int32)
    with pytest.raises(Exception, match=r"SSC compiled for dtype=fp16, this call needs dtype=fp32"):
        _call(cell, np.ones((T, H), np.float32), ids, np.ones((T, K), np.float32)).asnumpy()
