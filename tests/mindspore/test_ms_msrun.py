"""HyperParallelMoEFFN across msrun ranks (ranks as processes over the shared-memory heap): one launch per EP
size runs every case of msrun_worker.py (PyNative and GRAPH; fp32, fp16, bf16; balanced, skewed, empty and
random routing; T=45, not a multiple of any tile), each against float64 and the standard MindSpore path, plus
bitwise repeats and a bucket growth the ranks agree on. EP sizes: $HPMOE_MSRUN_EP (default "4")."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("msrun_worker.py")
EP_SIZES = [int(v) for v in os.environ.get("HPMOE_MSRUN_EP", "4").split(",") if v]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("ep", EP_SIZES)
def test_msrun_group_matches_float64_and_standard_path(ep, tmp_path):
    venv_bin = Path(sys.executable).parent
    msrun = venv_bin / "msrun"
    if not msrun.exists():
        pytest.skip(f"msrun not found next to {sys.executable}")
    env = dict(os.environ, PATH=f"{venv_bin}:{os.environ.get('PATH', '')}")  # msrun starts `python` from PATH
    port = _free_port()
    cmd = [str(msrun), f"--worker_num={ep}", f"--local_worker_num={ep}", f"--master_port={port}",
           f"--log_dir={tmp_path / 'log'}", "--join=True", str(WORKER), str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    logs = "\n".join(p.read_text()[-3000:] for p in sorted((tmp_path / "log").glob("worker_*.log")))
    assert proc.returncode == 0, f"msrun failed ({proc.returncode}):\n{proc.stderr[-2000:]}\n{logs}"
    for rank in range(ep):
        result = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert result["error"] is None, f"rank {rank}: {result['error']}"
        assert result["ep"] == ep and len(result["cases"]) == 6
        for case in result["cases"]:
            assert case["bitwise_repeat"], f"rank {rank} {case['case']}: repeated calls differ"
            for against in ("vs_float64", "vs_standard"):
                for name, (err, tol) in case[against].items():
                    assert err <= tol, f"rank {rank} {case['case']} {name} {against}: {err:.2e} > {tol:.1e}"
        growth = result["growth"]
        assert len(growth["messages"]) == 1 and "growing the bucket C=16" in growth["messages"][0]
        for name, (err, tol) in growth["vs_float64"].items():
            assert err <= tol, f"rank {rank} after growth: {name} {err:.2e} > {tol:.1e}"
    capacities = {json.loads((tmp_path / f"rank{r}.json").read_text())["growth"]["capacity"] for r in range(ep)}
    assert len(capacities) == 1, f"ranks grew to different buckets: {capacities}"
    # This launch's heaps are named hpmoe-<msrun pid>-<port>-... (other jobs on the machine make their own).
    leaked = sorted(n for n in os.listdir("/dev/shm") if n.startswith("hpmoe-") and f"-{port}-" in n)
    assert not leaked, f"shared heaps left behind: {leaked}"
