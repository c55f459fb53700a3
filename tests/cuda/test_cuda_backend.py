"""The CUDA backend on a GPU: every output and gradient against the float64 reference (balanced, skewed and
empty-expert routing; bf16 and fp16; EP 1 and 2), bitwise-identical repeats, a lost put reported as a wait
timeout (not a hang), refusals before launch, and the per-task trace. Skips with the reason when the library
or a GPU is missing (CI: nvcc compiles the sources, no GPU runs them)."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from hpmoe.config import make_config
from hpmoe.cuda.native import CudaFailure, gpu_count, gpu_unavailable_reason
from hpmoe.reference import moe_reference
from hpmoe.runtime.routing import bucket_for, make_routing
from hpmoe.runtime.tolerances import compare
from hpmoe.runtime.twin import make_inputs

GPUS = gpu_count()
needs_gpu = pytest.mark.skipif(GPUS == 0, reason=gpu_unavailable_reason() or "no GPU")

# Small shapes that still cover every path: several 128-row GMM tiles, N and K not multiples of the 128 x 32
# block tile (masking), expert boundaries inside tiles, 8-wide vectors.
BASE = dict(tokens=256, hidden=200, inter=72, experts_per_rank=4, topk=3, tile_m=128, wgrad_tile=8,
            token_tile=64, num_aic=4, num_aiv=4)


def config(ep: int, dtype: str, routing: str, seed: int = 0, **over):
    cfg = make_config(None, {**BASE, "ep": ep, "dtype": dtype, **over})
    ids, weights = make_routing(cfg, routing, seed)
    cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, ids))
    return cfg, make_inputs(cfg, ids, weights, seed)


def devices(ep: int) -> list[int]:
    """One GPU per rank when there are enough (P2P across GPUs), else ranks share GPUs (small tests only)."""
    return [r % max(GPUS, 1) for r in range(ep)]


def run_group(cfg, inputs, iterations: int = 1, timeout_s: float = 10.0):
    from hpmoe.cuda.group import CudaGroup
    with CudaGroup(cfg, devices(cfg.ep)) as g:
        g.load_inputs(inputs)
        raws = []
        for _ in range(iterations):
            g.run("fwd", timeout_s=timeout_s)
            g.run("bwd", timeout_s=timeout_s)
            raws.append(g.raw_outputs())
        return g.outputs(), raws


@needs_gpu
@pytest.mark.parametrize("ep", [1, 2, 4])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("routing", ["balanced", "skewed", "empty"])
@pytest.mark.parametrize("queues", ["split", "mixed", "pipelines", "pipelines+pool"])
def test_outputs_match_float64_reference(ep, dtype, routing, queues):
    cfg, inputs = config(ep, dtype, routing, mixed_queues=queues != "split", row_pipelines="pipelines" in queues,
                         claim_pool="pool" in queues)
    outputs, _ = run_group(cfg, inputs)
    ref = moe_reference(inputs.x, inputs.w1, inputs.w2, inputs.topk_ids, inputs.topk_weights, inputs.dy)
    rows = compare(outputs, ref, dtype)
    bad = [f"{name}: {err:.3e} > {tol:.1e}" for name, err, tol, ok in rows if not ok]
    assert not bad, f"{ep=} {dtype=} {routing=}: " + "; ".join(bad)


@needs_gpu
def test_repeated_runs_are_bitwise_identical():
    cfg, inputs = config(2, "bf16", "skewed", seed=3)
    _, raws = run_group(cfg, inputs, iterations=3)  # invocations 1..3 of one group (epoch counters)
    _, again = run_group(cfg, inputs)               # a fresh group
    # The same tasks on other workers: mixed queues and row pipelines change who runs a task, not its order.
    _, mixed = run_group(cfg.replace(mixed_queues=True), inputs)
    _, pipelines = run_group(cfg.replace(mixed_queues=True, row_pipelines=True), inputs)
    _, pool = run_group(cfg.replace(claim_pool=True), inputs, iterations=3)  # claims across invocations
    for raw in raws[1:] + again + mixed + pipelines + pool:
        for name in raw:
            assert np.array_equal(raw[name], raws[0][name]), f"{name} differs between runs"


@needs_gpu
def test_lost_put_is_reported_not_hung():
    from hpmoe.cuda.group import CudaGroup
    cfg, inputs = config(1, "bf16", "balanced")
    with CudaGroup(cfg, devices(1)) as g:
        g.load_inputs(inputs)
        start = time.perf_counter()
        with pytest.raises(CudaFailure, match=r"rank 0 AI[CV] worker \d+: task \d+ \(\w+, queue position \d+\): "
                                              r"wait timed out on event \d+: counter \d+, needs \d+"):
            g.run("fwd", timeout_s=1.0, fault=(0, "drop-put", 3))
        assert time.perf_counter() - start < 20
        with pytest.raises(CudaFailure, match="earlier launch of this group failed"):
            g.run("fwd")
        with pytest.raises(CudaFailure, match="earlier launch of this group failed"):  # the op's path too
            g.launch(0, "bwd", 0)


@needs_gpu
def test_speculative_forward_whose_peer_never_launches_is_reported_not_hung():
    """The speculative bucket's agreement (docs/cuda.md, "Routing beyond the bucket") is a bounded wait too:
    rank 0 launches, rank 1 never does; rank 0 stops at its timeout and the poll names what went wrong."""
    from hpmoe.cuda.group import CudaGroup
    cfg, inputs = config(2, "bf16", "balanced")
    with CudaGroup(cfg, devices(2)) as g:
        g.load_inputs(inputs)
        g.launch(0, "fwd", 0, plan=True, run_if="speculate", timeout_s=1.0)
        deadline = time.perf_counter() + 20
        while True:
            try:
                g.poll()
            except CudaFailure as e:
                assert "rank 0: the ranks did not agree on the routing's rows within the timeout" in str(e), str(e)
                break
            assert time.perf_counter() < deadline, "rank 0 still waits for rank 1 after 20 s (timeout 1 s)"
            time.sleep(0.1)


@needs_gpu
def test_refusals_before_launch():
    from hpmoe.cuda.group import CudaGroup
    cfg, _ = config(1, "fp32", "balanced")
    with pytest.raises(CudaFailure, match="bf16 or fp16"):
        CudaGroup(cfg, devices(1))
    cfg, _ = config(1, "bf16", "balanced", num_aic=400, num_aiv=400)
    with pytest.raises(CudaFailure, match="co-resident"):
        CudaGroup(cfg, devices(1))
    cfg, inputs = config(1, "bf16", "balanced")
    with CudaGroup(cfg, devices(1)) as g:
        g.load_inputs(inputs)
        with pytest.raises(CudaFailure, match="rank 1 is not a rank of this process"):
            g.launch(1, "fwd", 0)


@needs_gpu
def test_trace_stamps_every_task(tmp_path):
    out = tmp_path / "trace.json"
    cmd = [sys.executable, "-m", "hpmoe.cli", "run", "--backend", "cuda", "--ep", "1", "--tokens", "256",
           "--hidden", "200", "--inter", "72", "--experts-per-rank", "4", "--topk", "3", "--tile-m", "128",
           "--wgrad-tile", "8", "--workers-aic", "4", "--workers-aiv", "4", "--dtype", "bf16", "--trace", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    events = json.loads(out.read_text())["traceEvents"]
    tasks = [e for e in events if e["ph"] == "X"]
    assert tasks and all(e["dur"] >= 0 and e["ts"] >= 0 for e in tasks)
    assert {"GMM", "SWIGLU", "GMM_WEIGHT_GRAD", "DISPATCH_PUT"} <= {e["name"] for e in tasks}


@pytest.mark.skipif(GPUS < 2, reason=f"one process per GPU needs 2+ GPUs, found {GPUS}")
def test_cli_one_process_per_gpu():
    ep = 4 if GPUS >= 4 else 2
    cmd = [sys.executable, "-m", "hpmoe.cli", "run", "--backend", "cuda", "--ep", str(ep), "--tokens", "256",
           "--hidden", "200", "--inter", "72", "--experts-per-rank", "4", "--topk", "3", "--tile-m", "128",
           "--wgrad-tile", "8", "--workers-aic", "4", "--workers-aiv", "4", "--dtype", "bf16", "--routing", "skewed",
           "--iterations", "2"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "one process per GPU" in res.stdout and res.stdout.count(" ok") == 5, res.stdout


@pytest.mark.skipif(GPUS > 0, reason="checks the no-GPU error path")
def test_without_gpu_cli_reports_one_line():
    cmd = [sys.executable, "-m", "hpmoe.cli", "run", "--backend", "cuda", "--preset", "small", "--ep", "1",
           "--dtype", "bf16"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "hpmoe run: error:" in res.stderr


def test_import_hpmoe_does_not_import_torch():
    code = ("import sys, hpmoe, hpmoe.cli, hpmoe.cuda.group, hpmoe.cuda.run, hpmoe.runtime.run_cmd; "
            "assert 'torch' not in sys.modules, 'torch was imported'")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_peer_ssc_files_are_refused_before_any_device_work():
    """peer_ssc (one process a rank, hpmoe.torch's runtime): each rank compiles its own SSCs and the group gets
    every rank's files; a list of the wrong length, a file for this rank that is not its own, or peer files
    without local_rank are refused with one line before the library is touched (no GPU needed)."""
    from hpmoe import ssc_io
    from hpmoe.compiler import compile_schedules
    from hpmoe.cuda.group import CudaGroup
    cfg, _ = config(2, "bf16", "balanced")
    own = compile_schedules(cfg, ["fwd", "bwd"], [1])
    files = {s.direction_name: ssc_io.to_bytes(s) for s in compile_schedules(cfg, ["fwd", "bwd"], [0, 1])
             if s.rank == 0}
    good = {d: [files[d], next(ssc_io.to_bytes(s) for s in own if s.direction_name == d)] for d in ("fwd", "bwd")}
    with pytest.raises(ValueError, match="peer_ssc is for one rank a process"):
        CudaGroup(cfg, [0], own, peer_ssc=good)
    with pytest.raises(CudaFailure, match=r"peer_ssc\['fwd'\] holds 1 files for ep=2"):
        CudaGroup(cfg, [0], own, local_rank=1, peer_ssc={**good, "fwd": good["fwd"][:1]})
    swapped = {**good, "bwd": [good["bwd"][1], good["bwd"][0]]}
    with pytest.raises(CudaFailure, match=r"peer_ssc\['bwd'\]\[1\] is not this rank's own bwd SSC"):
        CudaGroup(cfg, [0], own, local_rank=1, peer_ssc=swapped)
    # Files handed in as already serialized (the runtime's compile cache) are checked the same way.
    with pytest.raises(CudaFailure, match=r"peer_ssc\['bwd'\]\[1\] is not this rank's own bwd SSC"):
        CudaGroup(cfg, [0], own, local_rank=1, peer_ssc=swapped, own_ssc={d: good[d][1] for d in good})
    with pytest.raises(ValueError, match="own_ssc is for one rank a process"):
        CudaGroup(cfg, [0], own, own_ssc={d: good[d][1] for d in good})
