"""Ranks as separate processes over POSIX shared memory (the mode `hpmoe run` and MindSpore use): results,
a rank that dies mid-run, and bitwise determinism across runs, iterations and execution modes."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from hpmoe.runtime import native
from hpmoe.runtime.twin import CpuTwin, Fault

from runtime_helpers import case, run_threads


def _run_processes(cfg, inputs, iterations=1, fault=None, timeout_s=20.0):
    with CpuTwin(cfg, shared_memory=True, timeout_s=timeout_s) as twin:
        twin.load_inputs(inputs)
        twin.run_processes(iterations, fault)
        return twin.raw_outputs()


def test_dead_rank_makes_the_others_fail_with_a_report():
    cfg, inputs, _ = case(ep=3)
    with pytest.raises(native.RuntimeFailure) as info:
        _run_processes(cfg, inputs, fault=Fault(rank=2, mode="exit", after=6, direction="fwd"), timeout_s=5.0)
    message = str(info.value)
    assert "rank 2 process died (exit status 70)" in message, message
    # the survivors each report the wait they were in, with the counter they saw and what it needed
    for r in (0, 1):
        assert re.search(rf"rank {r}: rank {r} (AIC|AIV) worker \d+: task \d+ \(\w+, queue position \d+\): "
                         rf"(wait timed out on|stopped after rank \d+ failed, waiting on) event \d+: counter \d+, "
                         rf"needs \d+ \(threshold \d+, invocation 1\)", message), message


def test_ten_runs_are_bitwise_identical():
    cfg, inputs, _ = case(ep=3, dtype="bf16", routing="skewed")
    first = None
    for _ in range(10):
        _, raw = run_threads(cfg, inputs)
        first = first or raw
        for name in first:
            assert np.array_equal(first[name], raw[name]), name


def test_epochs_iterations_and_modes_agree_bitwise():
    """Ten fwd+bwd invocations in one heap (epoch counters, never reset), and two runs with ranks as
    processes, give the bits of a single threaded run."""
    cfg, inputs, _ = case(ep=3, dtype="fp16")
    _, once = run_threads(cfg, inputs)
    _, tenth = run_threads(cfg, inputs, iterations=10)
    procs_a = _run_processes(cfg, inputs, iterations=3)
    procs_b = _run_processes(cfg, inputs)
    for name in once:
        for other in (tenth, procs_a, procs_b):
            assert np.array_equal(once[name], other[name]), name


def _cli(*args):
    return subprocess.run([sys.executable, "-c", "import sys; from hpmoe.cli import main; sys.exit(main())", "run", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args", [
    [],
    ["--ep", "5", "--topk", "1", "--hidden", "40", "--inter", "20", "--wgrad-tile", "4", "--routing", "empty",
     "--dtype", "fp16"],
    ["--ep", "3", "--topk", "8", "--experts-per-rank", "3", "--hidden", "48", "--inter", "24", "--wgrad-tile", "8",
     "--routing", "skewed", "--dtype", "bf16"],
])
def test_hpmoe_run_cli(args):
    res = _cli(*args)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.strip().splitlines()
    assert "ranks as processes" in lines[0]
    names = [line.split()[0] for line in lines[1:]]
    assert names == ["y", "dx", "dw1", "dw2", "dtopk_weights"]
    assert all(line.endswith(" ok") for line in lines[1:])


def test_hpmoe_run_cli_refuses_routing_beyond_bucket():
    res = _cli("--routing", "skewed", "--recv-rows-per-src", "16")
    assert res.returncode == 2
    assert re.fullmatch(r"hpmoe run: error: rank \d+ sends \d+ rows to rank \d+; the SSC bucket holds C=16; "
                        r"compile with --recv-rows-per-src \d+\n", res.stderr), res.stderr
