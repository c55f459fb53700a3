"""The user's-step results as a table, and several runs' JSON files (`cuda_user_step.py --json-out`) merged
into one: a sweep runs one process per shape (benchmarks/cuda_shapes_sweep.sh), so that a shape that fails
or runs out of time costs only its own row. Needs no torch.

    python3 benchmarks/user_step_table.py out/a.json out/b.json [--json-out all.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HEADER = ("| experts of, tokens, routing | PyTorch fwd+bwd | MoEFFN fwd+bwd | its kernels | ratio of single calls (user)"
          " | ratio of the kernels | MoEFFN / kernels | fwd ratio (user) | GMM in loop / _grouped_mm |")


def table(rows: list[dict]) -> str:
    lines = [HEADER, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['shape']} {r['tokens']} {r['routing']} | {r['torch_fwdbwd_ms']:.2f} ms | "
                     f"{r['hpmoe_fwdbwd_ms']:.2f} ms | {r['same_call_kernels_ms']:.2f} ms | {r['ratio_user_fwdbwd']:.2f} | "
                     f"{r['ratio_kernels_fwdbwd']:.2f} | {r['user_over_kernels']:.3f} | {r['ratio_user_fwd']:.2f} | "
                     f"{r['gmm_ratio']:.2f} |")
    return "\n".join(lines)


def merge(paths: list[Path]) -> dict:
    """One result of every run, rows in the files' order; the runs must share a commit and a device."""
    runs = [json.loads(p.read_text()) for p in paths]
    for key in ("commit", "device"):
        seen = {r.get(key) for r in runs}
        if len(seen) > 1:
            raise ValueError(f"the files come from different {key}s: {sorted(map(str, seen))}")
    return {"commit": runs[0].get("commit"), "device": runs[0].get("device"),
            "rows": [row for r in runs for row in r["rows"]]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", type=Path, help="cuda_user_step.py --json-out files")
    p.add_argument("--json-out", type=Path, help="write the merged result here")
    args = p.parse_args()
    missing = [str(f) for f in args.files if not f.is_file()]
    if missing:
        p.error(f"no such file: {missing[0]}")
    try:
        merged = merge(args.files)
    except (ValueError, KeyError, json.JSONDecodeError) as e:
        p.error(f"cannot merge: {e}")
    print(f"# {merged['device']}  commit {merged['commit']}")
    print(table(merged["rows"]))
    if args.json_out:
        args.json_out.write_text(json.dumps(merged, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
