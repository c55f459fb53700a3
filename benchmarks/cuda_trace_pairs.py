"""Each GMM task's duration in one trace against the same task's in another, split by whether the task started
together with a task of its type on the other block of its 2-block cluster (blocks 2c and 2c + 1), and by
fifths of the launch: what pairing pool units on a cluster (HPMOE_GEMM_PAIRS builds) costs a unit beside the
units of the same launch that ran alone, with the contention of that launch the same for both.

    python3 benchmarks/cuda_trace_pairs.py BASE.json PAIRED.json [--together-us 5]

Both traces from benchmarks/cuda_shape_trace.py at one shape and seed (the same task ids). Prints, per launch and
GMM task type, the median ratio PAIRED / BASE for the tasks that started together and for the rest.
"""
from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys

GMM_TYPES = ("GMM", "GMM_TRANS_B", "GMM_WEIGHT_GRAD")


def load(path: str) -> tuple[list[dict], dict[int, str]]:
    """A trace's task events and its launches' names (by pid)."""
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    return [e for e in events if e.get("ph") == "X"], names


def started_with_peer(e: dict, lanes: dict[int, list[dict]], within_us: float) -> bool:
    """Whether the cluster peer block (tid ^ 1) started a task of e's type within `within_us` of e."""
    return any(o["name"] == e["name"] and abs(o["ts"] - e["ts"]) < within_us for o in lanes.get(e["tid"] ^ 1, []))


def compare(base: list[dict], paired: list[dict], pid: int, within_us: float, bins: int = 5) -> list[str]:
    before = {e["args"]["task"]: e["dur"] for e in base if e["pid"] == pid}
    mine = [e for e in paired if e["pid"] == pid]
    if not mine:
        return []
    t0, t1 = min(e["ts"] for e in mine), max(e["ts"] + e["dur"] for e in mine)
    lanes = collections.defaultdict(list)
    for e in mine:
        lanes[e["tid"]].append(e)
    lines = []
    for kind in GMM_TYPES:
        ratios = collections.defaultdict(list)  # (together, fifth) -> [paired / base]
        for e in mine:
            task = e["args"]["task"]
            if e["name"] != kind or before.get(task, 0) <= 0:
                continue
            fifth = min(bins - 1, int(bins * (e["ts"] - t0) / (t1 - t0)))
            ratios[(started_with_peer(e, lanes, within_us), fifth)].append(e["dur"] / before[task])
        if not ratios:
            continue

        def median(together: bool, fifth: int | None = None) -> str:
            values = [r for (t, b), rs in ratios.items() if t == together and fifth in (None, b) for r in rs]
            return f"{statistics.median(values):.3f} (n={len(values)})" if values else "-"

        lines.append(f"  {kind:<16} started with the peer {median(True)}, alone {median(False)}")
        lines.append("    by fifth of the launch, together / alone: "
                     + "  ".join(f"{median(True, b).split()[0]}/{median(False, b).split()[0]}" for b in range(bins)))
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("base", help="trace of the build without pairing")
    p.add_argument("paired", help="trace of the build with pairing, same shape and seed")
    p.add_argument("--together-us", type=float, default=5.0, help="starts this close count as together")
    args = p.parse_args()
    try:
        (base, _), (paired, names) = load(args.base), load(args.paired)
    except (OSError, ValueError, KeyError) as exc:
        print(f"cuda_trace_pairs: cannot read the traces: {exc}", file=sys.stderr)
        return 2
    for pid in sorted({e["pid"] for e in paired}):
        lines = compare(base, paired, pid, args.together_us)
        if lines:
            print(f"{names.get(pid, pid)}: task duration, paired build / base build (median)")
            print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
