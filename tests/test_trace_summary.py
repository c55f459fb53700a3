"""benchmarks/cuda_trace_summary.py (torch-free): per task type the mean, median and p90 durations, and the
gaps a block spent between two of its tasks, on a small synthetic trace whose answers are known."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))
import cuda_trace_summary  # noqa: E402


def trace() -> list[dict]:
    """fwd rank 0: lane 0 runs GMM tasks of 10, 20, ..., 100 us back to back; lane 1 runs one 30 us SWIGLU task,
    then, 200 us later, a 40 us GMM whose inputs were ready 100 us into the gap."""
    events = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "fwd rank 0 (GPU)"}},
              {"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": {"name": "AIC 0"}},
              {"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "AIC 1"}}]
    t = 0
    for d in range(10, 101, 10):
        events.append({"ph": "X", "name": "GMM", "pid": 0, "tid": 0, "ts": t, "dur": d, "args": {"pool": True}})
        t += d
    events.append({"ph": "X", "name": "SWIGLU", "pid": 0, "tid": 1, "ts": 0, "dur": 30, "args": {}})
    events.append({"ph": "X", "name": "GMM", "pid": 0, "tid": 1, "ts": 230, "dur": 40,
                   "args": {"pool": True, "ready": 130}})
    return events


def test_percentiles_are_nearest_rank():
    values = list(range(10, 101, 10))
    assert cuda_trace_summary.percentile(values, 50) == 60 and cuda_trace_summary.percentile(values, 90) == 100
    assert cuda_trace_summary.percentile([7], 90) == 7


def test_long_gaps_finds_only_waits_over_the_bound():
    lanes = {0: [e for e in trace() if e.get("tid") == 0 and e["ph"] == "X"],
             1: [e for e in trace() if e.get("tid") == 1 and e["ph"] == "X"]}
    assert cuda_trace_summary.long_gaps(lanes.values(), 50) == [(30, 200, "SWIGLU", "GMM", 100)]
    assert cuda_trace_summary.long_gaps(lanes.values(), 200) == []
    del lanes[1][1]["args"]["ready"]  # a task that waits on nothing: the whole gap was with its inputs ready
    assert cuda_trace_summary.long_gaps(lanes.values(), 50) == [(30, 200, "SWIGLU", "GMM", 0)]


def test_summary_lines(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": trace()}))
    proc = subprocess.run([sys.executable, str(BENCH / "cuda_trace_summary.py"), str(path)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    gmm = next(line for line in proc.stdout.splitlines() if line.strip().startswith("GMM "))
    # 11 GMM tasks: 10..100 us and one of 40; mean 590 / 11 = 54, nearest-rank median 50, p90 90.
    assert "n=11" in gmm and "mean     54 us" in gmm and "median     50" in gmm and "p90     90" in gmm, gmm
    assert "gaps over 50 us between two tasks of one block: 1, 0.2 block-ms (0.1 waiting on inputs, the rest with " \
           "inputs ready); longest 200 us at 0.03 ms (SWIGLU -> GMM, 100 us of it waiting)" in proc.stdout, proc.stdout


def test_unreadable_trace_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, str(BENCH / "cuda_trace_summary.py"), str(tmp_path / "none.json")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "cannot read" in proc.stderr, proc.stderr


def test_transitions_count_only_the_short_gaps_of_each_lane():
    lane = [{"ts": ts, "dur": 10, "args": {}} for ts in (0, 13, 25, 60, 70)]  # gaps 3, 2, 25, 0
    other = [{"ts": 85, "dur": 5, "args": {}}, {"ts": 100, "dur": 5, "args": {}}]  # one gap of 10
    assert cuda_trace_summary.transitions([lane, other], 20) == (4, 15.0)
    assert cuda_trace_summary.transitions([lane], 2) == (2, 2.0)
