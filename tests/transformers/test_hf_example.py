"""examples/train_transformers.py runs end to end on a CPU with the stand-in op (--cpu-reference): both runs
train, their curves agree, summary.json holds what the README reads. Skipped without torch or transformers."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="PyTorch is not installed (optional dependency)")
pytest.importorskip("transformers", reason="transformers is not installed (optional dependency)")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_transformers.py"


def test_example_cpu_reference_run(tmp_path):
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--cpu-reference", "--steps", "4", "--warmup", "1",
                           "--log-every", "3",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    runs = {r["impl"]: r for r in summary["runs"]}
    assert set(runs) == {"grouped_mm", "hpmoe"} and all(len(r["losses"]) == 4 for r in runs.values())
    # fp32 both sides, 4 steps: the project's fp32 tolerance (observed ~1e-7).
    assert summary["max_rel_loss_diff"] <= 1e-4, summary["max_rel_loss_diff"]
    assert runs["hpmoe"]["tokens_per_s"] > 0 and "[hpmoe] step 4/4 loss" in proc.stdout
    # Steps 1-4 logged every 3 steps: one interval of 3 steps, one of 1; each a time a step.
    for r in runs.values():
        assert len(r["step_ms_per_log_interval"]) == 2 and all(ms > 0 for ms in r["step_ms_per_log_interval"])
    # The stand-in op keeps no receive buckets: one layer entry each, nothing grown.
    stats = runs["hpmoe"]["bucket_stats"]
    idle = {"buckets": [], "overflows_seen": 0, "overflow_waits": 0, "group_seconds": 0.0, "group_parts": {}}
    assert stats and all(b == idle for b in stats)
    assert "[hpmoe] receive buckets: 0 growths over" in proc.stdout


def test_example_rejects_bad_steps():
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--steps", "0"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--steps must be at least 1" in proc.stderr.strip().splitlines()[-1]


def test_deterministic_runs_repeat_bit_for_bit(tmp_path):
    """--deterministic: two runs give the same losses, bit for bit, for each implementation (on the GPU this
    needed warn_only=False: cuDNN's attention backward; benchmarks/RESULTS.md session 35)."""
    losses = []
    for run in ("a", "b"):
        proc = subprocess.run([sys.executable, str(EXAMPLE), "--cpu-reference", "--deterministic", "--steps", "3",
                               "--warmup", "1", "--out", str(tmp_path / run)], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json.loads((tmp_path / run / "summary.json").read_text())
        assert summary["args"]["deterministic"] is True
        losses.append({r["impl"]: r["losses"] for r in summary["runs"]})
    assert losses[0] == losses[1] and len(losses[0]["hpmoe"]) == 3, losses
