"""`hpmoe` command line. Every error is one line on stderr and exit code 2."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

from . import limits, ssc_io
from .args import OneLineParser, ValueCheckError, check_output_dir, float_arg, int_arg
from .compiler import compile_schedules
from .config import PRESETS, MoeConfig, make_config
from .errors import HpmoeError, ScheduleError
from .inspect_ssc import summary, summary_line, to_json
from .validate import check
from .verify_cmd import verify_files

# Config fields settable from the command line: (flag, field, type, help). The converters check sign and
# type as the flag is parsed; config.resolve checks ranges and consistency.
CONFIG_FLAGS = [
    ("--ep", "ep", int_arg(1), "EP group size (ranks)"),
    ("--tokens", "tokens", int_arg(1), "tokens per rank (shape bucket)"),
    ("--hidden", "hidden", int_arg(1), "hidden size h"),
    ("--inter", "inter", int_arg(1), "expert intermediate size I (W1 has 2I columns)"),
    ("--experts-per-rank", "experts_per_rank", int_arg(1), "local experts per rank"),
    ("--topk", "topk", int_arg(1), "experts per token"),
    ("--dtype", "dtype", str, "fp32, fp16 or bf16"),
    ("--tile-m", "tile_m", int_arg(1), "rows per row tile (dispatch chunk, GMM/SwiGLU/combine tile)"),
    ("--recv-rows-per-src", "recv_rows_per_src", int_arg(0), "bucket: rows a rank can receive from each source"),
    ("--capacity-factor", "capacity_factor", float_arg(0.0, lo_open=True),
     "bucket from balanced load x factor, if rows not given"),
    ("--wgrad-tile", "wgrad_tile", int_arg(0), "output rows per weight-gradient tile"),
    ("--token-tile", "token_tile", int_arg(0), "tokens per combine-reduce tile"),
    ("--workers-aic", "num_aic", int_arg(1), "AIC workers (A3: 25)"),
    ("--workers-aiv", "num_aiv", int_arg(1), "AIV workers (A3: 50)"),
    ("--gmm-n-block", "gmm_n_block", int_arg(0),
     "output columns per GMM task, a multiple of 8 (0: the compiler's choice for the shape; CPU twin and CUDA)"),
    ("--wgrad-n-block", "wgrad_n_block", int_arg(0),
     "output columns per weight-gradient task, a multiple of 8, with the claim pool (0: the whole width; "
     "CPU twin and CUDA; wgrad_split.py says what it measured)"),
    ("--act-n-block", "act_n_block", int_arg(0),
     "columns of A per SwiGLU / SwiGLU-gradient task, a multiple of 8 and of the GMM block (0: whole rows, "
     "the faster default; CPU twin and CUDA)"),
]


def add_config_args(p: argparse.ArgumentParser, default_preset: str | None = None) -> None:
    g = p.add_argument_group("configuration (preset, then --config JSON, then flags)")
    g.add_argument("--preset", default=default_preset, help=f"one of: {', '.join(sorted(PRESETS))}")
    g.add_argument("--config", metavar="JSON", help="JSON object of config fields")
    for flag, field, typ, text in CONFIG_FLAGS:
        g.add_argument(flag, dest=field, type=typ, metavar=field.upper(), help=text)
    g.add_argument("--no-ratr", action="store_true", help="turn rank-aware task reordering off")
    g.add_argument("--no-interleave", action="store_true", help="turn cache-guided GMM interleaving off")
    g.add_argument("--mixed-queues", action=argparse.BooleanOptionalAction, default=None,
                   help="deal the dispatch puts and the final top-k reductions over every worker, cube ones "
                        "included (CPU twin and CUDA; an Ascend AIC cannot run them). Default: on for --backend "
                        "cuda, else off")
    g.add_argument("--claim-pool", action=argparse.BooleanOptionalAction, default=None,
                   help="weight-gradient tiles in a pool claimed at run time by the cube-queue workers, so skewed "
                        "routing does not leave one worker with the hot experts' tiles (CPU twin and CUDA). "
                        "Default: on for --backend cuda, else off")
    g.add_argument("--row-pipelines", action="store_true",
                   help="each row tile's whole chain (GMM, SwiGLU, GMM, combine put) on one cube-queue worker; "
                        "implies --mixed-queues (CPU twin and CUDA)")
    g.add_argument("--weights-transposed", action="store_true", default=None,
                   help="expert weights as nn.Linear and transformers store them, W1 [E, 2I, h] (gate rows "
                        "first), W2 [E, h, I], read in place; dW1/dW2 come out the same way (CPU twin and CUDA)")
    g.add_argument("--fuse-swiglu", action="store_true", default=None,
                   help="SwiGLU in GMM1's tiles and its gradient in the activation gradient's (no vector SwiGLU "
                        "tasks; H saved with gate and up interleaved in groups of 128 columns, so --inter must be a "
                        "multiple of 128); needs --mixed-queues (CPU twin and CUDA)")
    g.add_argument("--expert-aligned", action="store_true", default=None,
                   help="each local expert's rows start on a tile_m boundary of their receive slot, so every row "
                        "tile holds one expert (pads between experts; C grows by up to experts_per_rank x "
                        "(tile_m - 1) rows); for many small experts (CPU twin and CUDA)")
    g.add_argument("--first-gmm-pool", action="store_true", default=None,
                   help="the first GMM of each direction and its SwiGLU step claimed from the pool in panel order "
                        "too, so the row tiles that read one weight panel run together; needs --mixed-queues and "
                        "--claim-pool without --row-pipelines (CPU twin and CUDA; MoEFFN's default there)")


def config_from_args(args: argparse.Namespace) -> MoeConfig:
    overrides = {field: getattr(args, field) for _, field, _, _ in CONFIG_FLAGS}
    if args.no_ratr:
        overrides["ratr"] = False
    if args.no_interleave:
        overrides["interleave"] = False
    overrides["mixed_queues"] = getattr(args, "mixed_queues", None)
    overrides["claim_pool"] = getattr(args, "claim_pool", None)
    overrides["weights_transposed"] = getattr(args, "weights_transposed", None)
    overrides["fuse_swiglu"] = getattr(args, "fuse_swiglu", None)
    overrides["expert_aligned"] = getattr(args, "expert_aligned", None)
    overrides["first_gmm_pool"] = getattr(args, "first_gmm_pool", None)
    if getattr(args, "row_pipelines", False):
        overrides["row_pipelines"] = True
        if overrides["mixed_queues"] is None:  # pipelines run vector tasks on cube workers: mixed queues
            overrides["mixed_queues"] = True
    return make_config(args.preset, overrides, args.config)


def directions(arg: str) -> list[str]:
    return ["fwd", "bwd"] if arg == "both" else [arg]


def cmd_compile(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    if args.rank is not None and not 0 <= args.rank < cfg.ep:
        raise HpmoeError(f"--rank {args.rank} is outside the EP group of {cfg.ep} ranks")
    ranks = list(range(cfg.ep)) if args.all_ranks or args.rank is None else [args.rank]
    out = check_output_dir(args.output)
    limits.check_compile(cfg, len(ranks))
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    schedules = compile_schedules(cfg, directions(args.direction), ranks)
    for d in directions(args.direction):
        check([s for s in schedules if s.direction_name == d], group=len(ranks) == cfg.ep)
    for s in schedules:
        path = out / f"rank{s.rank}.{s.direction_name}.ssc"
        nbytes = ssc_io.write(s, path)
        print(f"{summary_line(s, nbytes)} -> {path}")
    (out / "config.json").write_text(json.dumps(cfg.to_json(), indent=2) + "\n")
    print(f"compiled {len(schedules)} SSC file(s) in {time.perf_counter() - start:.3f} s (validated)")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    s = ssc_io.read(args.file)
    if args.json:
        json.dump(to_json(s), sys.stdout, indent=1)
        print()
    else:
        print(summary(s, Path(args.file).stat().st_size))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    return verify_files(args.files, args.max_errors)  # C++ load-time validator, then the schedule checks


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="hpmoe", description="HyperParallel-MoE: compile, inspect, verify, run "
                                     "(CPU twin) and simulate (Ascend A3 model) static tile-level MoE-FFN schedules.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("compile", help="compile SSC files for one rank or a whole EP group",
                       description="Compile Static Schedule Configurations: one file per rank and direction.")
    add_config_args(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--rank", type=int_arg(0), help="compile this rank only (rank-local validation)")
    which.add_argument("--all-ranks", action="store_true", help="compile every rank (default; group validation)")
    p.add_argument("--direction", choices=["fwd", "bwd", "both"], default="both")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output folder")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("inspect", help="print an SSC's summary or full JSON", description="Summarise an SSC file.")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="full JSON dump")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("verify", help="validate SSC files (a whole group when every rank is given)",
                       description="Validate SSC files: structure, thresholds, coverage, writes, deadlock freedom.")
    p.add_argument("files", nargs="+")
    p.add_argument("--max-errors", type=int_arg(1), default=20, help="violations to list per direction (at least 1)")
    p.set_defaults(func=cmd_verify)

    for register in _extra_commands():
        register(sub)
    return parser


def _extra_commands() -> list[Callable[[argparse._SubParsersAction], None]]:
    """Subcommands of the CPU-twin runtime (`run`) and the simulator (`simulate`, `tune`). Imported here, not
    at the top: those modules import this one for the shared config flags."""
    from .runtime.run_cmd import register as register_run
    from .sim.cli import register_simulate, register_tune
    return [register_run, register_simulate, register_tune]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, its one line already printed): return it
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return args.func(args)
    except (HpmoeError, ValueCheckError) as exc:
        return _one_line(args.command, exc)
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: stop quietly, and keep Python from complaining at exit.
        sys.stderr.close()
        return 0
    except OSError as exc:  # a file error the command did not foresee: still one line
        return _one_line(args.command, f"{str(exc.filename) + ': ' if exc.filename else ''}{exc.strerror or exc}")
    except MemoryError:
        return _one_line(args.command, "out of memory (the size estimate let this config through: please report)")
    except KeyboardInterrupt:
        print(f"hpmoe {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug, not bad input: still one line, with a distinct exit status
        if os.environ.get("HPMOE_TRACEBACK"):
            raise
        print(f"hpmoe {args.command}: internal error: {type(exc).__name__}: {exc} "
              f"(a bug; HPMOE_TRACEBACK=1 shows where)".replace("\n", " "), file=sys.stderr)
        return 70


def _one_line(command: str, exc: object) -> int:
    text = " ".join(str(exc).split("\n"))
    print(f"hpmoe {command}: error: {text}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
