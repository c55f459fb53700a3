"""`hpmoe simulate` and `hpmoe tune`: predicted A3 latencies of SSC groups (registered in hpmoe.cli)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from .. import limits
from ..args import check_output_file, float_arg, int_arg, int_list_arg
from ..cli import add_config_args, config_from_args, directions
from ..errors import HpmoeError
from .api import Prediction, load_ssc_dir, predict
from .hw import DEFAULT_HW, load_hw
from .routing import check_routing_spec, routing_spec_arg

BANNER = "PREDICTED on the {hw} performance model (no Ascend hardware was used; see docs/simulator.md)"


def format_prediction(pred: Prediction) -> str:
    cfg = pred.cfg
    lines = [BANNER.format(hw=pred.hw.name),
             f"config: ep={cfg.ep} tokens={cfg.tokens} hidden={cfg.hidden} inter={cfg.inter} "
             f"E_local={cfg.experts_per_rank} topk={cfg.topk} tile_m={cfg.tile_m} C={cfg.recv_rows_per_src} "
             f"wgrad_tile={cfg.wgrad_tile} token_tile={cfg.token_tile} workers={cfg.num_aic}/{cfg.num_aiv} "
             f"ratr={cfg.ratr} interleave={cfg.interleave} routing={pred.routing}",
             f"{'dir':<4} {'path':<26} {'max over ranks':>15}  per rank (ms)"]
    total_f = total_b = 0.0
    for d, r in pred.fused.items():
        per = " ".join(f"{x / 1e3:.2f}" for x in r.rank_latency_us)
        lines.append(f"{d:<4} {'HP-MoE SSC (predicted)':<26} {r.latency_us / 1e3:>12.3f} ms  {per}")
        total_f += r.latency_us
        b = pred.baseline.get(d)
        if b is not None:
            per = " ".join(f"{x / 1e3:.2f}" for x in b.rank_latency_us)
            lines.append(f"{d:<4} {'kernel-by-kernel (pred.)':<26} {b.latency_us / 1e3:>12.3f} ms  {per}")
            lines.append(f"{d:<4} {'predicted speedup':<26} {b.latency_us / r.latency_us:>14.2f}x")
            total_b += b.latency_us
        lines.append(f"{d:<4} {'bound: AIC work / workers':<26} {r.aic_bound_us() / 1e3:>12.3f} ms  (no order of "
                     f"these tiles beats it)")
        util = r.utilisation(pred.hw).mean(axis=0)
        lines.append(f"{d:<4} {'SSC AIC/AIV busy, L2 hit':<26} {util[0]:>8.0%} / {util[1]:.0%}, "
                     f"L2 hit {r.l2_hit_rate.mean():.0%} (mean over ranks)")
    if len(pred.fused) > 1:
        lines.append(f"{'sum':<4} {'HP-MoE SSC (predicted)':<26} {total_f / 1e3:>12.3f} ms")
        if total_b:
            lines.append(f"{'sum':<4} {'kernel-by-kernel (pred.)':<26} {total_b / 1e3:>12.3f} ms  "
                         f"speedup {total_b / total_f:.2f}x")
    return "\n".join(lines)


def cmd_simulate(args: argparse.Namespace) -> int:
    for path, what in ((args.trace, "trace file"), (args.plot, "plot file"), (args.json, "summary file")):
        if path is not None:  # refuse a bad output path before minutes of simulation, not after
            check_output_file(path, what)
    hw = load_hw(args.hw)
    schedules = None
    if args.ssc:
        if not Path(args.ssc).is_dir():
            raise HpmoeError(f"--ssc {args.ssc} is not a folder")
        schedules = load_ssc_dir(args.ssc)
        cfg = schedules[0].cfg
        dirs = sorted({s.direction_name for s in schedules}, key=["fwd", "bwd"].index)
        if args.direction != "both":
            dirs = [d for d in dirs if d == args.direction]
    else:
        cfg = config_from_args(args)
        limits.check_simulate(cfg)
        dirs = directions(args.direction)
    if not dirs:
        raise HpmoeError(f"no {args.direction} schedules to simulate")
    pred = predict(cfg, hw, dirs, args.routing, schedules=schedules, dynamic_dispatch=args.dynamic_dispatch,
                   baseline=not args.no_baseline)
    print(format_prediction(pred))
    if args.trace:
        n = __import__("hpmoe.sim.trace", fromlist=["write_trace"]).write_trace(pred, args.trace)
        print(f"trace: {n} events -> {args.trace} (open in ui.perfetto.dev or chrome://tracing)")
    if args.plot:
        __import__("hpmoe.sim.plot", fromlist=["plot_prediction"]).plot_prediction(pred, args.plot)
        print(f"plot -> {args.plot}")
    if args.json:
        Path(args.json).write_text(json.dumps(pred.summary(), indent=1) + "\n")
        print(f"summary -> {args.json}")
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from .tune import tune
    if args.output is not None:
        check_output_file(args.output, "config output")
    if args.backend == "cuda":
        from ..cuda.tune_cmd import cmd_tune_cuda
        return cmd_tune_cuda(args)
    check_routing_spec(args.routing)
    hw = load_hw(args.hw)
    cfg = config_from_args(args)
    limits.check_simulate(cfg)
    print(BANNER.format(hw=hw.name))
    print(f"tuning tile_m, wgrad_tile, token_tile, AIV workers for ep={cfg.ep} tokens={cfg.tokens} "
          f"routing={args.routing}; memory budget {hw.memory_budget_bytes / 2**30:.1f} GiB")
    res = tune(cfg, hw, args.routing, rounds=args.rounds, log=print)
    b, s = res.best, res.start
    print(f"start : {' '.join(f'{k}={v}' for k, v in s.params.items())}: predicted {s.total_us / 1e3:.3f} ms "
          f"(fwd {s.fwd_us / 1e3:.3f}, bwd {s.bwd_us / 1e3:.3f})")
    print(f"chosen: {' '.join(f'{k}={v}' for k, v in b.params.items())}: predicted {b.total_us / 1e3:.3f} ms "
          f"(fwd {b.fwd_us / 1e3:.3f}, bwd {b.bwd_us / 1e3:.3f}); predicted gain {res.gain:.3f}x "
          f"over {len(res.tried)} candidates; SSC tensors {b.memory_bytes / 2**30:.2f} GiB")
    if args.output:
        Path(args.output).write_text(json.dumps(b.cfg.to_json(), indent=2) + "\n")
        print(f"config -> {args.output} (use with --config)")
    return 0


def register_tune(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="search tile sizes / splits / AIV workers minimising predicted latency",
                       description="Coordinate search over tile_m, wgrad_tile, token_tile and AIV workers that "
                       "minimises predicted fwd+bwd latency under the device-memory budget; writes the config.")
    add_config_args(p, default_preset="deepseek-v3")
    p.add_argument("--hw", metavar="FILE", help=f"hardware override JSON on top of {DEFAULT_HW.name}")
    # Checked per backend in cmd_tune: the A3 model and the GPU draw routings differently.
    p.add_argument("--routing", default="balanced",
                   help="a3: balanced, zipf:S[:SEED] or hot:F[:SEED]; cuda: balanced, random, skewed or empty")
    p.add_argument("--rounds", type=int_arg(1, 100), default=3,
                   help="coordinate-search rounds, 1 to 100 (stops early when stable)")
    p.add_argument("-o", "--output", metavar="JSON", help="write the chosen config (a --config file)")
    p.add_argument("--backend", choices=["a3", "cuda"], default="a3",
                   help="a3: predict with the Ascend A3 model (default); cuda: measure each candidate on this "
                        "host's GPUs and cache the fastest per shape and GPU (hpmoe/tuning_cache.py)")
    p.add_argument("--devices", metavar="LIST", type=int_list_arg(0, 1023),
                   help="cuda: GPU of each rank (default: rank r on GPU r)")
    p.add_argument("--iterations", type=int_arg(1, 1000), default=5,
                   help="cuda: timed fwd+bwd launches per candidate (the median counts)")
    p.add_argument("--warm-seconds", type=float_arg(0.0, 60.0), default=1.0,
                   help="cuda: untimed fwd+bwd launches per candidate for this long first, so that it is timed "
                        "at the clock a training loop holds under the GPU's power cap (docs/cuda.md)")
    p.add_argument("--cache", metavar="JSON", help="cuda: tuning cache file (default $HPMOE_TUNING_CACHE or "
                   "~/.cache/hpmoe/tuning.json)")
    p.set_defaults(func=cmd_tune)


def add_sim_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hw", metavar="FILE", help=f"hardware override JSON on top of {DEFAULT_HW.name}")
    p.add_argument("--routing", type=routing_spec_arg, default="balanced",
                   help="balanced, zipf:S[:SEED] or hot:F[:SEED]")
    p.add_argument("--direction", choices=["fwd", "bwd", "both"], default="both")


def register_simulate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="predict A3 latency of an SSC group and of the kernel-by-kernel baseline",
                       description="Discrete-event simulation of a whole EP group's SSCs on the Ascend A3 "
                       "performance model, next to kernel-by-kernel execution. Every number is a prediction.")
    add_config_args(p, default_preset="deepseek-v3")
    add_sim_args(p)
    p.add_argument("--ssc", metavar="DIR", help="simulate the .ssc files in DIR (a whole group) instead of compiling")
    p.add_argument("--dynamic-dispatch", action="store_true", help="charge the paper's dynamic per-task dispatch")
    p.add_argument("--no-baseline", action="store_true", help="skip the kernel-by-kernel baseline")
    p.add_argument("--trace", metavar="JSON", help="write a Chrome/Perfetto trace")
    p.add_argument("--plot", metavar="PNG", help="write a timeline plot")
    p.add_argument("--json", metavar="FILE", help="write the summary as JSON")
    p.set_defaults(func=cmd_simulate)
