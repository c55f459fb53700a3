"""Summary of a GPU trace (`hpmoe run --backend cuda --trace`, `cuda_ep_bench.py --trace`): per direction and
rank, each task type's first start, last end and block-time, how many blocks run GMM tiles over the span,
and where the GMM-running blocks sat idle (cube-queue blocks and every block that ran a claimed unit: the gap
before each task type); then every block's gaps between two tasks: the short transitions (the worker loop's
triggers, claim and waits) and the long gaps, split into waiting on inputs and not. Open the same file in
ui.perfetto.dev for the picture.

    python3 benchmarks/cuda_trace_summary.py trace.json[.gz] [--rank 0] [--bins 20]
"""
from __future__ import annotations

import argparse
import collections
import gzip
import json
import sys


def load(path: str) -> list[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def summarize(events: list[dict], rank: int, bins: int) -> None:
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    tasks = [e for e in events if e["ph"] == "X"]
    for pid, name in sorted(processes.items()):
        if f"rank {rank} " not in name + " ":
            continue
        mine = sorted((e for e in tasks if e["pid"] == pid), key=lambda e: e["ts"])  # so every lane is in order
        if not mine:
            continue
        t0 = min(e["ts"] for e in mine)
        t1 = max(e["ts"] + e["dur"] for e in mine)
        print(f"{name}: span {(t1 - t0) / 1e3:.2f} ms")
        by_type = collections.defaultdict(list)
        for e in mine:
            by_type[e["name"]].append(e)
        for kind, group in sorted(by_type.items(), key=lambda kv: min(e["ts"] for e in kv[1])):
            busy = sum(e["dur"] for e in group)
            durations = sorted(e["dur"] for e in group)
            # Median and p90 beside the mean: a task type whose time does not move with the launch's load (a
            # tight p10-p90) is bound by its own instructions, not by memory (SwiGLU, session 18).
            print(f"  {kind:<20} n={len(group):<5} first {(min(e['ts'] for e in group) - t0) / 1e3:6.2f} ms  "
                  f"last end {(max(e['ts'] + e['dur'] for e in group) - t0) / 1e3:6.2f} ms  "
                  f"{busy / 1e3:8.1f} block-ms  mean {busy / len(group):6.0f} us  "
                  f"median {percentile(durations, 50):6.0f}  p90 {percentile(durations, 90):6.0f}")
        by_lane = collections.defaultdict(list)
        for e in mine:
            by_lane[e["tid"]].append(e)
        # Cube-queue lanes and claimer lanes (a lane holding a claimed unit), each with all its tasks; traces
        # from before the lane fix left some claimed units unnamed.
        gmm_lanes = {tid: lane for tid, lane in by_lane.items()
                     if lanes.get((pid, tid), "").startswith("AIC") or any(e["args"].get("pool") for e in lane)}
        width = (t1 - t0) / bins
        profile = [0.0] * bins
        idle = collections.Counter()
        for lane in gmm_lanes.values():
            previous = t0
            for e in lane:
                idle[e["name"]] += e["ts"] - previous
                previous = e["ts"] + e["dur"]
                if not e["name"].startswith("GMM"):
                    continue
                for b in range(bins):
                    lo = t0 + b * width
                    overlap = min(lo + width, e["ts"] + e["dur"]) - max(lo, e["ts"])
                    if overlap > 0:
                        profile[b] += overlap / width
        print(f"  blocks running GMM tiles, per {100 // bins}% of the span: {[round(p) for p in profile]}")
        print("  idle before each task type on those blocks (block-ms): "
              + ", ".join(f"{k} {v / 1e3:.1f}" for k, v in idle.most_common()))
        count, total = transitions(by_lane.values(), TRANSITION_US)
        busy = sum(e["dur"] for e in mine)
        if count:
            print(f"  transitions of {TRANSITION_US} us or less between two tasks of one block: {count}, mean "
                  f"{total / count:.2f} us, {total / 1e3:.1f} block-ms ({100 * total / busy:.1f}% of the busy time)")
        gaps = long_gaps(by_lane.values(), GAP_US)
        if gaps:
            at, gap, before, after, waiting = max(gaps, key=lambda g: g[1])
            print(f"  gaps over {GAP_US} us between two tasks of one block: {len(gaps)}, "
                  f"{sum(g[1] for g in gaps) / 1e3:.1f} block-ms ({sum(g[4] for g in gaps) / 1e3:.1f} waiting on "
                  f"inputs, the rest with inputs ready); longest {gap:.0f} us at {(at - t0) / 1e3:.2f} ms "
                  f"({before} -> {after}, {waiting:.0f} us of it waiting)")


GAP_US = 50
TRANSITION_US = 20  # a gap this short is the worker loop between two tasks (triggers, claim, waits met at once)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile of sorted `values`, nearest rank."""
    return values[min(len(values) - 1, int(q / 100 * len(values)))]


def transitions(lanes, up_to_us: float) -> tuple[int, float]:
    """(how many, total us) of the gaps of at most `up_to_us` between consecutive tasks on one lane (each lane's
    tasks in order of start)."""
    count, total = 0, 0.0
    for lane in lanes:
        for a, b in zip(lane, lane[1:]):
            gap = b["ts"] - a["ts"] - a["dur"]
            if gap <= up_to_us:
                count, total = count + 1, total + gap
    return count, total


def long_gaps(lanes, over_us: float) -> list[tuple[float, float, str, str, float]]:
    """(end of the earlier task, gap in us, its type, the next task's type, us of the gap before the next task's
    inputs were ready) for every pair of consecutive tasks on one lane more than `over_us` apart. The trace
    writer stamps each task with when its producers had all ended (args.ready, hpmoe/cuda/trace.py); a task
    without it waited on nothing. The rest of a gap the block spent with its next task's inputs ready. Each
    lane's tasks in order of start."""
    gaps = []
    for lane in lanes:
        for a, b in zip(lane, lane[1:]):
            end = a["ts"] + a["dur"]
            gap = b["ts"] - end
            if gap > over_us:
                waiting = min(gap, max(0.0, b["args"].get("ready", end) - end))
                gaps.append((end, gap, a["name"], b["name"], waiting))
    return gaps


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--bins", type=int, default=20)
    args = p.parse_args()
    try:
        events = load(args.trace)
    except (OSError, ValueError, KeyError) as exc:
        print(f"cuda_trace_summary: cannot read {args.trace}: {exc}", file=sys.stderr)
        return 2
    try:
        summarize(events, args.rank, args.bins)
    except BrokenPipeError:  # `| head`: stop quietly
        sys.stderr.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
