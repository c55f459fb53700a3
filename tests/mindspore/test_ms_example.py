"""The training example, short: a few AdamW steps of the MoE block with hpmoe and with the standard path
(GRAPH mode, one process); the loss curves agree, the loss falls, the plot is written. The few-hundred-step
4-rank run is `./build.sh train` (README)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_compare.py"


def test_short_training_run_agrees_with_the_standard_path(tmp_path):
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--ep", "1", "--steps", "6", "--tokens", "96",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["max_rel_loss_diff"] <= 1e-5  # a few steps: rounding-level agreement (no top-k flip yet)
    for curve in summary["loss"].values():
        assert curve[-1] < curve[0], curve
    assert (tmp_path / "loss.png").stat().st_size > 10_000
    assert "median step time" in proc.stdout
