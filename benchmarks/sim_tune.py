"""`hpmoe tune` on the paper's configurations: chosen tile sizes / AIV workers and the predicted gain.

    .venv/bin/python benchmarks/sim_tune.py [--eps 4 8 16] [--tokens 4096 8192] [--json FILE]  (output: benchmarks/sim_results/tune.md)

Every latency is PREDICTED by the hpmoe A3 model (hpmoe.sim); the paper reports no tuning results to compare with.
"""
from __future__ import annotations

import argparse
import json
import time

from hpmoe.config import make_config
from hpmoe.sim.hw import load_hw
from hpmoe.sim.tune import tune


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eps", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--tokens", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--hw", help="hardware override JSON")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    hw = load_hw(args.hw)
    rows = []
    print("All latencies are PREDICTED by the hpmoe A3 model (balanced routing, deepseek-v3 shapes).\n")
    print("| tokens | EP | default (tile_m / wgrad / token / AIV) | default pred. fwd+bwd | chosen | chosen pred. "
          "fwd+bwd | pred. gain | candidates | search s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for tokens in args.tokens:
        for ep in args.eps:
            cfg = make_config("deepseek-v3", {"ep": ep, "tokens": tokens})
            t0 = time.perf_counter()
            res = tune(cfg, hw)
            wall = time.perf_counter() - t0
            fmt = lambda c: " / ".join(str(c.params[k]) for k in ("tile_m", "wgrad_tile", "token_tile", "num_aiv"))
            print(f"| {tokens} | {ep} | {fmt(res.start)} | {res.start.total_us / 1e3:.2f} ms "
                  f"({res.start.fwd_us / 1e3:.2f} + {res.start.bwd_us / 1e3:.2f}) | {fmt(res.best)} | "
                  f"{res.best.total_us / 1e3:.2f} ms ({res.best.fwd_us / 1e3:.2f} + {res.best.bwd_us / 1e3:.2f}) | "
                  f"{res.gain:.3f}x | {len(res.tried)} | {wall:.0f} |", flush=True)
            rows.append({"tokens": tokens, "ep": ep, "start": res.start.params, "chosen": res.best.params,
                         "start_ms": res.start.total_us / 1e3, "chosen_ms": res.best.total_us / 1e3,
                         "gain": res.gain, "skipped": {str(c.params): c.skipped for c in res.tried if c.skipped}})
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"predicted": True, "results": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
