"""The user's training step run back to back, as a training loop runs it: hpmoe.torch.MoEFFN and the plain
PyTorch path (cuda_torch_path.py) at the same shape, parameters and routing, in blocks of --seconds each,
alternating, --rounds times, the GPU never idle inside a block. Beside each block's ms per step: the SM clock
and board power that nvidia-smi samples every 100 ms, and the reasons it reports for holding the clock back.

Why: at these shapes an H200 runs into its 700 W power cap within a second, and then the SM clock depends on
how much power a kernel draws. A benchmark that alternates single calls with the GPU idle between them
(cuda_user_step.py) gives both paths the same clock, the one their mix draws, so it times the hungrier path
at the other's clock. Also printed, for comparison, the two steps alternating call by call in this run.

    python3 benchmarks/cuda_sustained_step.py [--shapes deepseek-v3:8192 mixtral-8x22b:4096] [--seconds 4]
        [--rounds 2] [--grad-buffer grad|none] [--wgrad-n-block N] [--fuse-wgrad-accumulation] [--json-out F]
        [--expert-aligned on|off] [--fuse-swiglu on|off] [--first-gmm-pool on|off] [--wgrad-tile N]

The schedule options (MoEFFN's keyword arguments of the same names; unset: MoEFFN's per-shape rule) let a
schedule be judged where it runs, at the power cap, each against the PyTorch path in its own run.

Ratio = PyTorch ms per step / hpmoe ms per step (above 1: hpmoe faster). "At equal clocks" divides out the
clock: PyTorch's ms x MHz over hpmoe's, the ratio if both ran at one clock.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_torch_path import moe_ffn_torch  # noqa: E402
from cuda_user_step import SHAPES, step_tensors  # noqa: E402

from hpmoe.config import make_config  # noqa: E402
from hpmoe.runtime.routing import make_routing  # noqa: E402
from hpmoe.torch import MoEFFN  # noqa: E402

POWER_CAP_BIT = 0x4  # nvidia-smi clocks_throttle_reasons: SW power cap


def smi_gpu(device: int) -> str:
    """nvidia-smi's -i for this torch device: its PCI bus id where torch gives one (device numbers can differ
    between the two under CUDA_VISIBLE_DEVICES), else the number."""
    bus = getattr(torch.cuda.get_device_properties(device), "pci_bus_id", None)
    return str(bus if bus else device)


class ClockSampler:
    """nvidia-smi sampling this GPU's SM clock, power and throttle reasons every 100 ms while open."""

    def __init__(self, device: int):
        self.cmd = ["nvidia-smi", "-i", smi_gpu(device), "--query-gpu=clocks.sm,power.draw,"
                    "clocks_throttle_reasons.active", "--format=csv,noheader,nounits", "-lms", "100"]
        self.proc = None

    def __enter__(self):
        try:
            self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except FileNotFoundError:
            self.proc = None
        self.samples = []
        return self

    def __exit__(self, *exc):
        if self.proc is None:
            return
        self.proc.terminate()
        out, _ = self.proc.communicate()
        for line in out.splitlines():
            parts = [p.strip() for p in line.split(",")]
            try:
                self.samples.append((int(parts[0]), float(parts[1]), int(parts[2], 16)))
            except (ValueError, IndexError):
                continue  # a line cut by terminate(), or "[N/A]"

    def summary(self) -> dict:
        if not self.samples:
            return {"sm_mhz": None, "power_w": None, "power_capped": None}
        return {"sm_mhz": statistics.median(s[0] for s in self.samples),
                "power_w": statistics.median(s[1] for s in self.samples),
                "power_capped": sum(bool(s[2] & POWER_CAP_BIT) for s in self.samples) / len(self.samples)}


def gpu_identity(device: int) -> str:
    """Which board this is (serial, driver, VBIOS, clock ceilings, power limit, ECC), from nvidia-smi: the same code
    took 4-10% longer a step on one lent H200 than on another, PyTorch's path the same on both
    (benchmarks/RESULTS.md, session 20), so a ratio goes with its board."""
    fields = "name,serial,driver_version,vbios_version,clocks.max.sm,clocks.max.mem,power.limit,ecc.mode.current"
    try:
        out = subprocess.run(["nvidia-smi", "-i", smi_gpu(device), f"--query-gpu={fields}",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (FileNotFoundError, subprocess.TimeoutExpired):
        out = ""
    return out or "unknown (nvidia-smi gave nothing)"


def run_block(step, seconds: float, device: int) -> dict:
    """Steps back to back for `seconds` (synchronising every 5 steps to read the time): ms per step and the
    clock while they ran."""
    torch.cuda.synchronize()
    with ClockSampler(device) as clocks:
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < seconds:
            for _ in range(5):
                step()
            torch.cuda.synchronize()
            n += 5
        elapsed = time.perf_counter() - t0
    return {"steps": n, "ms_per_step": 1e3 * elapsed / n, **clocks.summary()}


def alternating(steps: dict, pairs: int) -> dict:
    """Median ms of single calls, the two paths alternating call by call, the GPU idle before each call
    (cuda_user_step.py's method)."""
    times = {name: [] for name in steps}
    for _ in range(pairs):
        for name, step in steps.items():
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            step()
            e.record()
            torch.cuda.synchronize()
            times[name].append(s.elapsed_time(e))
    return {name: statistics.median(t) for name, t in times.items()}


ON_OFF = {"on": True, "off": False}


def schedule_options(args) -> dict:
    """MoEFFN keyword arguments the command line set (the others keep MoEFFN's per-shape rule)."""
    options = {name: ON_OFF[getattr(args, name)] for name in ("expert_aligned", "fuse_swiglu", "first_gmm_pool")
               if getattr(args, name) is not None}
    if args.wgrad_tile is not None:
        options["wgrad_tile"] = args.wgrad_tile
    if args.tile_m is not None:
        options["tile_m"] = args.tile_m
    return options


def bench(shape: str, args) -> dict:
    model, tokens = shape.split(":")
    tokens = int(tokens)
    h, inter, E, k = SHAPES[model]
    cfg = make_config(None, {"ep": 1, "tokens": tokens, "hidden": h, "inter": inter, "experts_per_rank": E,
                             "topk": k, "dtype": "bf16"})
    ids_np, w_np = make_routing(cfg, args.routing, 0)
    options = schedule_options(args)
    m = MoEFFN(h, inter, E, k, wgrad_n_block=args.wgrad_n_block, fuse_wgrad_accumulation=args.fuse_wgrad_accumulation,
               **options)
    x, dy, ids, tw, w1t, w2t = step_tensors(m, tokens, ids_np, w_np, torch.Generator(device="cuda").manual_seed(0))
    ids64 = ids.long()
    fresh = args.grad_buffer == "none"

    def hp_step():
        if fresh:
            x.grad = tw.grad = m.w1.grad = m.w2.grad = None
        m(x, ids, tw).backward(dy)

    def pt_step():
        if fresh:
            x.grad = tw.grad = w1t.grad = w2t.grad = None
        moe_ffn_torch(x, w1t, w2t, ids64, tw).backward(dy)

    steps = {"hpmoe": hp_step, "torch": pt_step}
    device = torch.cuda.current_device()
    for name, step in steps.items():  # warm-up, and into the power state a training loop holds
        run_block(step, args.warmup_seconds, device)
    row = {"shape": shape, "routing": args.routing, "grad_buffer": args.grad_buffer,
           "fuse_wgrad_accumulation": args.fuse_wgrad_accumulation, "schedule_options": options,
           "blocks": []}
    for r in range(args.rounds):
        for name, step in steps.items():
            b = {"round": r + 1, "path": name, **run_block(step, args.seconds, device)}
            row["blocks"].append(b)
            clock = f"{b['sm_mhz']:.0f} MHz, {b['power_w']:.0f} W, power-capped {100 * b['power_capped']:.0f}% of " \
                    "samples" if b["sm_mhz"] is not None else "no nvidia-smi"
            print(f"  {shape} round {r + 1} {name:5s}: {b['ms_per_step']:7.2f} ms a step ({b['steps']} steps; {clock})",
                  flush=True)
    for name in steps:
        blocks = [b for b in row["blocks"] if b["path"] == name]
        row[f"{name}_ms"] = statistics.median(b["ms_per_step"] for b in blocks)
        mhz = [b["sm_mhz"] for b in blocks if b["sm_mhz"] is not None]
        row[f"{name}_mhz"] = statistics.median(mhz) if mhz else None
    row["ratio_sustained"] = row["torch_ms"] / row["hpmoe_ms"]
    if row["hpmoe_mhz"] and row["torch_mhz"]:
        row["ratio_equal_clocks"] = row["torch_ms"] * row["torch_mhz"] / (row["hpmoe_ms"] * row["hpmoe_mhz"])
    alt = alternating(steps, args.pairs)
    row["alternating_hpmoe_ms"], row["alternating_torch_ms"] = alt["hpmoe"], alt["torch"]
    row["ratio_alternating"] = alt["torch"] / alt["hpmoe"]
    return row


def print_table(rows: list[dict]) -> None:
    print("\n| shape | hpmoe ms a step (MHz) | PyTorch ms a step (MHz) | ratio sustained | at equal clocks "
          "| ratio alternating single calls |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        mhz = lambda v: f" ({v:.0f})" if v else ""  # noqa: E731
        eq = f"{r['ratio_equal_clocks']:.2f}" if r.get("ratio_equal_clocks") else "-"
        print(f"| {r['shape']} | {r['hpmoe_ms']:.2f}{mhz(r['hpmoe_mhz'])} | {r['torch_ms']:.2f}{mhz(r['torch_mhz'])} "
              f"| {r['ratio_sustained']:.2f} | {eq} | {r['ratio_alternating']:.2f} |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", nargs="+", default=["deepseek-v3:8192", "mixtral-8x22b:4096"], metavar="MODEL:TOKENS",
                   help=f"MODEL one of {', '.join(SHAPES)}")
    p.add_argument("--seconds", type=float, default=4.0, help="length of each timed block")
    p.add_argument("--warmup-seconds", type=float, default=2.0, help="untimed block of each path first")
    p.add_argument("--rounds", type=int, default=2, help="timed blocks per path, alternating")
    p.add_argument("--pairs", type=int, default=10, help="single calls per path for the alternating comparison")
    p.add_argument("--routing", default="random", choices=["balanced", "random", "skewed"])
    p.add_argument("--grad-buffer", choices=["grad", "none"], default="grad",
                   help="grad: weight gradients add into .grad over the steps; none: every step starts fresh")
    p.add_argument("--wgrad-n-block", type=int, default=None, metavar="N",
                   help="MoEFFN(wgrad_n_block=N): columns per weight-gradient unit (default: its rule)")
    p.add_argument("--fuse-wgrad-accumulation", action="store_true",
                   help="MoEFFN(fuse_wgrad_accumulation=True): its kernel adds dW to .grad (the PyTorch path's "
                        "autograd still adds its own)")
    for name, what in (("expert-aligned", "each local expert's rows in row tiles of their own"),
                       ("fuse-swiglu", "SwiGLU (and its gradient) inside the GMM tiles' epilogue"),
                       ("first-gmm-pool", "the first GMM claimed from the pool in panel order")):
        p.add_argument(f"--{name}", choices=tuple(ON_OFF), default=None, help=f"MoEFFN({name.replace('-', '_')}=...): "
                       f"{what} (default: MoEFFN's rule for the shape)")
    p.add_argument("--wgrad-tile", type=int, default=None, metavar="N",
                   help="MoEFFN(wgrad_tile=N): output rows per weight-gradient tile (default: MoEFFN's, 128)")
    p.add_argument("--tile-m", type=int, default=None, metavar="N",
                   help="MoEFFN(tile_m=N): rows per row tile (default 128; 256 for a build with the tall GMM tile, "
                        "-DHPMOE_GEMM_TALL=1)")
    p.add_argument("--json-out", type=Path)
    args = p.parse_args()
    for shape in args.shapes:
        if ":" not in shape or shape.split(":")[0] not in SHAPES or not shape.split(":")[1].isdigit():
            p.error(f"--shapes: {shape!r} is not MODEL:TOKENS with MODEL one of {', '.join(SHAPES)}")
    if not torch.cuda.is_available():
        print("cuda_sustained_step.py: error: no CUDA GPU visible", file=sys.stderr)
        return 2
    options = schedule_options(args)
    print(f"{torch.cuda.get_device_name()}: blocks of {args.seconds:.0f} s per path, {args.rounds} rounds, "
          f"{args.routing} routing, gradients into {'.grad' if args.grad_buffer == 'grad' else 'fresh tensors'}"
          + (", hpmoe adding dW in its kernel" if args.fuse_wgrad_accumulation else "")
          + (f", MoEFFN options {options}" if options else ""),
          flush=True)
    board = gpu_identity(torch.cuda.current_device())
    print(f"board: {board}", flush=True)
    rows = [bench(shape, args) for shape in args.shapes]
    print_table(rows)
    if args.json_out:
        args.json_out.write_text(json.dumps([{**r, "board": board} for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
