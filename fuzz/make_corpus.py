"""Seeds of the executing fuzz target (fuzz/corpus/exec/): whole groups of tiny configs, each file of the group
back to back, plus the golden single-rank files (loaded and validated, not executed: not a whole group).
Files named regress_* are crashing inputs the fuzzer found with the region check off (docs/reliability.md);
this script keeps them.

Run after an intended format or scheduler change, with the golden files: .venv/bin/python fuzz/make_corpus.py
"""
from __future__ import annotations

import shutil
from pathlib import Path

from hpmoe import ssc_io
from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config

HERE = Path(__file__).resolve().parent
TINY = dict(tokens=32, hidden=32, inter=16, experts_per_rank=2, topk=2, dtype="fp32", tile_m=16, wgrad_tile=16,
            token_tile=16, num_aic=1, num_aiv=2)
GROUPS = {"tiny_ep2": dict(TINY, ep=2), "tiny_ep1_bf16": dict(TINY, ep=1, dtype="bf16"),
          "tiny_ep3": dict(TINY, ep=3, topk=3)}


def main() -> None:
    out = HERE / "corpus" / "exec"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        if not old.name.startswith("regress_"):
            old.unlink()
    for name, fields in GROUPS.items():
        cfg = make_config(None, fields)
        for d in ("fwd", "bwd"):
            blobs = [ssc_io.to_bytes(s) for s in compile_schedules(cfg, [d], list(range(cfg.ep)))]
            (out / f"{name}.{d}").write_bytes(b"".join(blobs))
    for golden in sorted((HERE.parent / "tests" / "golden").glob("*.ssc")):
        shutil.copy(golden, out / golden.name)
    print(f"{len(list(out.iterdir()))} seeds in {out}")


if __name__ == "__main__":
    main()
