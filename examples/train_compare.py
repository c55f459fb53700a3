"""Launch examples/train_moe.py on `--ep` msrun ranks (hpmoe and the standard path, same seed, GRAPH mode,
AdamW), then compare: the loss curves (mean over ranks) must agree within --tolerance (max relative
difference over all steps), both curves go to <out>/loss.png, and the median step time of each is printed.
Exit 1 if the curves disagree.

    .venv/bin/python examples/train_compare.py --ep 4 --steps 300 --out out/train
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# Both runs are float32 with the same inputs; they differ only in summation order (hpmoe: per-tile fp32
# GEMMs; standard: dense bmm with zero-weighted rows), ~1e-7 relative per step, and the curves agree to that
# level as long as every token picks the same experts. The router's top-k is discontinuous: once a near tie
# resolves differently (measured: after step 105 of 300, EP 4), the two runs train on different routings and
# drift apart by up to ~1% while both keep converging. 2e-2 bounds that; the rounding-level phase is reported
# separately ("steps agreeing to 1e-6").
DEFAULT_TOLERANCE = 2e-2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args, out: Path) -> None:
    worker_args = [str(HERE / "train_moe.py"), str(out), "--steps", str(args.steps), "--tokens", str(args.tokens)]
    venv_bin = Path(sys.executable).parent
    if args.ep == 1:
        cmd = [sys.executable] + worker_args
    else:
        cmd = [str(venv_bin / "msrun"), f"--worker_num={args.ep}", f"--local_worker_num={args.ep}",
               f"--master_port={free_port()}", f"--log_dir={out / 'log'}", "--join=True"] + worker_args
    env = dict(os.environ, PATH=f"{venv_bin}:{os.environ.get('PATH', '')}")  # msrun starts `python` from PATH
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        logs = "".join(p.read_text()[-2000:] for p in sorted((out / "log").glob("worker_*.log")))
        sys.exit(f"train_moe.py failed ({proc.returncode}): {proc.stderr[-2000:]}\n{logs}")


def plot(curves: dict[str, np.ndarray], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for (name, curve), style in zip(curves.items(), ("-", "--")):
        ax.plot(np.arange(1, len(curve) + 1), curve, style, label=name)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (mean over ranks)")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ep", type=int, default=4)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--tokens", type=int, default=512, help="tokens per rank")
    p.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE)
    p.add_argument("--out", default="out/train")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    launch(args, out)
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(args.ep)]
    curves = {impl: np.mean([r[impl]["loss"] for r in ranks], axis=0) for impl in ("hpmoe", "standard")}
    rel = np.abs(curves["hpmoe"] - curves["standard"]) / np.abs(curves["standard"])
    warm = min(5, args.steps - 1)  # the first steps include graph compilation
    step = {impl: float(np.median([np.median(r[impl]["step_s"][warm:]) for r in ranks])) for impl in curves}
    a = ranks[0]["args"]
    title = (f"EP {args.ep}, T {args.tokens}/rank, h {a['hidden']}, I {a['inter']}, {a['experts']} experts/rank, "
             f"top-{a['topk']}")
    plot(curves, out / "loss.png", title)
    print(title)
    print(f"loss: first {curves['hpmoe'][0]:.5f} / {curves['standard'][0]:.5f}, last {curves['hpmoe'][-1]:.5f} / "
          f"{curves['standard'][-1]:.5f} (hpmoe / standard)")
    same = int(np.argmax(rel > 1e-6)) if (rel > 1e-6).any() else args.steps
    print(f"max relative loss difference over {args.steps} steps: {rel.max():.2e} (tolerance {args.tolerance:.0e}); "
          f"steps agreeing to 1e-6: the first {same}")
    print(f"median step time (GRAPH mode, after {warm} warm-up steps): hpmoe {step['hpmoe'] * 1e3:.1f} ms, "
          f"standard {step['standard'] * 1e3:.1f} ms, hpmoe / standard {step['hpmoe'] / step['standard']:.2f}")
    print(f"plot: {out / 'loss.png'}")
    (out / "summary.json").write_text(json.dumps({"max_rel_loss_diff": float(rel.max()), "step_s": step,
                                                   "loss": {k: v.tolist() for k, v in curves.items()}}))
    return 0 if rel.max() <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
