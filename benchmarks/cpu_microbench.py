"""Section-6 microbenchmarks (SwiGLU + Add) measured on the CPU twin: builds the benchmark binary if needed,
sweeps M, prints one table, optionally saves the raw results (--json-out) and a PNG (--plot).

Every number comes from benchmarks/microbench/hpmoe_microbench_swiglu_add (one process per M, all modes
alternating within each repeat). See docs/microbenchmarks.md for what each column means.

  .venv/bin/python benchmarks/cpu_microbench.py [--m 2K,8K,32K,64K] [--repeats 7] [--plot out/microbench.png]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = "hpmoe_microbench_swiglu_add"


def log(msg: str) -> None:
    print(f"[cpu_microbench] {msg}", file=sys.stderr, flush=True)


def fail(msg: str) -> None:
    print(f"cpu_microbench: error: {msg}", file=sys.stderr)
    sys.exit(2)


def ensure_built(build: Path) -> Path:
    """Configures (if needed) and builds the benchmark target; make is a no-op when it is up to date."""
    if not (build / "CMakeCache.txt").exists():
        log(f"configuring {build}")
        subprocess.run(["cmake", "-S", str(REPO), "-B", str(build), "-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
                       check=True, stdout=subprocess.DEVNULL)
    log(f"building {TARGET}")
    subprocess.run(["cmake", "--build", str(build), "--target", TARGET, "-j", os.environ.get("JOBS", "2")],
                   check=True, stdout=subprocess.DEVNULL)
    return build / "benchmarks" / "microbench" / TARGET


def perf_status() -> str:
    """What `perf stat` says about hardware cache counters here (the binary counts through the same syscall)."""
    if shutil.which("perf") is None:
        return "perf not installed"
    res = subprocess.run(["perf", "stat", "-e", "LLC-load-misses,cache-misses", "true"], capture_output=True,
                         text=True)
    if "<not supported>" in res.stderr or res.returncode != 0:
        return "perf installed, but LLC-load-misses and cache-misses are <not supported> here (no hardware PMU events)"
    return "perf: hardware cache events supported"


def parse_rows(text: str) -> list[str]:
    parts = [p.strip() for p in text.split(",")]
    for p in parts:
        digits = p[:-1] if p[-1:].upper() == "K" else p
        if not digits.isdigit() or int(digits) == 0:
            fail(f"--m takes positive row counts like 2K,8K, got '{p}'")
    return parts


def run_point(binary: Path, m: str, args: argparse.Namespace) -> dict:
    cmd = [str(binary), "--m", m, "--tile-rows", str(args.tile_rows), "--workers", str(args.workers), "--dtype",
           args.dtype, "--repeats", str(args.repeats), "--warmup", str(args.warmup), "--json"]
    if args.modes:
        cmd += ["--modes", args.modes]
    if args.llc:
        cmd.append("--llc")
    start = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        fail(f"M={m}: {' '.join(cmd)} exited {res.returncode}: {res.stderr.strip()}")
    point = json.loads(res.stdout)
    point["command"] = " ".join(["hpmoe_microbench_swiglu_add"] + cmd[1:])
    point["seconds"] = time.perf_counter() - start
    if res.stderr.strip():
        point["note"] = res.stderr.strip()
    return point


def cell(point: dict, mode: str, key: str = "median_us", scale: float = 1e-3, fmt: str = "{:.2f}") -> str:
    m = point["modes"].get(mode)
    if m is None or m.get(key) is None:
        return "-"
    return fmt.format(m[key] * scale)


def ratio(point: dict, a: str, b: str, key: str = "median_us") -> str:
    ma, mb = point["modes"].get(a), point["modes"].get(b)
    if ma is None or mb is None or not mb[key]:
        return "-"
    return f"{ma[key] / mb[key]:.3f}"


def imbalance(point: dict, mode: str) -> str:
    """Most / least busy worker's handler time: unequal worker speed shows here (static cannot rebalance)."""
    m = point["modes"].get(mode)
    busy = m.get("worker_busy_us") if m else None
    if not busy or min(busy) <= 0:
        return "-"
    return f"{max(busy) / min(busy):.2f}"


COLUMNS = [
    ("M", lambda p: f"{p['m'] // 1024}K" if p["m"] % 1024 == 0 else str(p["m"])),
    ("A MiB", lambda p: f"{p['intermediate_bytes'] / 2**20:.0f}"),
    ("A/LLC", lambda p: f"{p['intermediate_bytes'] / p['llc_bytes']:.2f}" if p["llc_bytes"] else "-"),
    ("serial ms", lambda p: cell(p, "serial")),
    ("inter ms", lambda p: cell(p, "interleaved")),
    ("ser/int", lambda p: ratio(p, "serial", "interleaved")),
    ("Add ser ms", lambda p: cell(p, "serial", "add_us")),
    ("Add int ms", lambda p: cell(p, "interleaved", "add_us")),
    ("Add ser/int", lambda p: ratio(p, "serial", "interleaved", "add_us")),
    ("int busy max/min", lambda p: imbalance(p, "interleaved")),
    ("dyn ms", lambda p: cell(p, "dynamic")),
    ("dyn/int", lambda p: ratio(p, "dynamic", "interleaved")),
    ("lifo ms", lambda p: cell(p, "dynamic-lifo")),
    ("lifo/int", lambda p: ratio(p, "dynamic-lifo", "interleaved")),
    ("disp st us", lambda p: cell(p, "noop-static", "dispatch_us_per_task", 1, "{:.3f}")),
    ("disp dyn us", lambda p: cell(p, "noop-dynamic", "dispatch_us_per_task", 1, "{:.3f}")),
    ("disp lifo us", lambda p: cell(p, "noop-dynamic-lifo", "dispatch_us_per_task", 1, "{:.3f}")),
]
LLC_COLUMNS = [
    ("LLC miss ser", lambda p: cell(p, "serial", "llc_misses", 1, "{:.3g}")),
    ("LLC miss int", lambda p: cell(p, "interleaved", "llc_misses", 1, "{:.3g}")),
]


def table(points: list[dict]) -> str:
    cols = COLUMNS + (LLC_COLUMNS if any(p.get("llc_event") for p in points) else [])
    rows = [[name for name, _ in cols]] + [[f(p) for _, f in cols] for p in points]
    widths = [max(len(r[i]) for r in rows) for i in range(len(cols))]
    lines = ["| " + " | ".join(c.rjust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def plot(points: list[dict], path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib not installed: no plot")
        return
    ms = [p["m"] for p in points]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for mode in ("serial", "interleaved", "dynamic", "dynamic-lifo"):
        ys = [p["modes"][mode]["median_us"] / 1e3 if mode in p["modes"] else None for p in points]
        if any(y is not None for y in ys):
            axes[0].plot(ms, ys, marker="o", label=mode)
    axes[0].set(title="SwiGLU+Add latency (median)", xlabel="M (rows)", ylabel="ms", yscale="log")
    for mode in ("serial", "interleaved"):
        ys = [p["modes"][mode]["add_us"] / 1e3 if mode in p["modes"] else None for p in points]
        axes[1].plot(ms, ys, marker="o", label=f"Add handler, {mode}")
    axes[1].set(title="Add (consumer) handler time per worker", xlabel="M (rows)", ylabel="ms", yscale="log")
    for mode in ("noop-static", "noop-dynamic", "noop-dynamic-lifo"):
        ys = [p["modes"][mode]["dispatch_us_per_task"] if mode in p["modes"] else None for p in points]
        axes[2].plot(ms, ys, marker="o", label=mode)
    axes[2].set(title="dispatch per task (no-op handlers)", xlabel="M (rows)", ylabel="us / task (worker time)")
    labels = [f"{m // 1024}K" if m % 1024 == 0 else str(m) for m in ms]
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xticks(ms, labels)
        ax.minorticks_off()
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
    p0 = points[0]
    fig.suptitle(f"CPU twin, {p0['workers']} workers, {p0['dtype']}, tiles of {p0['tile_rows']} rows, "
                 f"LLC {p0['llc_bytes'] / 2**20:.0f} MiB")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    log(f"wrote {path}")


def run_sweep(args: argparse.Namespace) -> tuple[list[dict], str]:
    rows = parse_rows(args.m)
    binary = ensure_built(args.build_dir)
    perf = perf_status()
    log(perf)
    points = []
    for i, m in enumerate(rows, 1):
        log(f"M={m} ({i}/{len(rows)}): {args.repeats} timed launches per mode ...")
        point = run_point(binary, m, args)
        log(f"M={m}: done in {point['seconds']:.1f} s; outputs identical across compute modes: {point['identical']}")
        points.append(point)
    return points, perf


def load_points(path: Path) -> tuple[list[dict], str]:
    try:
        text = path.read_text()
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    try:
        doc = json.loads(text)
        if isinstance(doc, dict) and "points" in doc:
            return doc["points"], doc.get("perf", "perf: not recorded")
        points = [doc]
    except json.JSONDecodeError:
        try:
            points = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as e:
            fail(f"{path} is neither a --json-out file nor --json lines: {e}")
    if not points or not all(isinstance(p, dict) and "modes" in p for p in points):
        fail(f"{path} holds no benchmark points")
    return points, "perf: not recorded (loaded results)"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--m", default="2K,8K,16K,32K,64K", help="row counts M, comma-separated, K = 1024")
    p.add_argument("--tile-rows", type=int, default=32)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--modes", default="", help="comma-separated subset (default: all)")
    p.add_argument("--llc", action="store_true", help="count LLC misses per launch (needs a hardware PMU)")
    p.add_argument("--build-dir", type=Path, default=Path(os.environ.get("HPMOE_BUILD_DIR", REPO / "build")))
    p.add_argument("--json-out", type=Path, help="write every point (with its command) as JSON")
    p.add_argument("--plot", type=Path, help="write a PNG of latency, Add time and dispatch cost vs M")
    p.add_argument("--load", type=Path, help="no run: tabulate (and plot) a --json-out file or the binary's --json "
                   "lines saved from a run elsewhere")
    args = p.parse_args()
    if args.tile_rows <= 0 or args.workers <= 0 or args.repeats <= 0 or args.warmup < 0:
        fail("--tile-rows, --workers and --repeats must be positive, --warmup non-negative")
    if args.load:
        points, perf = load_points(args.load)
    else:
        points, perf = run_sweep(args)
    p0 = points[0]
    repeats = len(next(iter(p0["modes"].values()))["samples_us"])
    print(f"CPU twin SwiGLU+Add: {p0['workers']} workers, {p0['dtype']}, tiles of {p0['tile_rows']} rows, median of "
          f"{repeats}; LLC {p0['llc_bytes'] / 2**20:.0f} MiB; {perf}; "
          f"LLC counters in the binary: {p0['llc_event'] or 'none counted'}")
    print(table(points))
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps({"perf": perf, "points": points}, indent=1) + "\n")
        log(f"wrote {args.json_out}")
    if args.plot:
        plot(points, args.plot)


if __name__ == "__main__":
    main()
