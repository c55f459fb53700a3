"""Regenerate the golden SSC files and their JSON dumps: `python tests/golden/make_golden.py`.

Run it only for an intended change to the format or the scheduler, and say so in the commit: the golden
files are what keeps the Python writer, the C++ reader and older SSCs in agreement (tests/test_golden.py).
"""
from __future__ import annotations

import json
from pathlib import Path

from hpmoe import ssc_io
from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config
from hpmoe.inspect_ssc import to_json

HERE = Path(__file__).resolve().parent

# Frozen here (not the "small" preset) so a preset change does not move the goldens.
GOLDEN_CONFIG = dict(tokens=64, hidden=64, inter=32, experts_per_rank=2, topk=2, dtype="fp32", tile_m=16,
                     wgrad_tile=16, token_tile=16, num_aic=2, num_aiv=4)
# (ep, rank, direction, flags set on): vector tasks in cube queues (kConfigMixedQueues), a claim pool
# (kConfigClaimPool) claimed by the cube-queue workers, and one claimed by every worker (both flags).
GOLDEN_FILES = [(2, 0, "fwd", ()), (2, 1, "bwd", ()), (3, 2, "fwd", ()), (3, 0, "bwd", ()),
                (2, 1, "bwd", ("mixed_queues",)), (2, 0, "bwd", ("claim_pool",)),
                (2, 0, "bwd", ("mixed_queues", "claim_pool"))]


def golden_name(ep: int, rank: int, direction: str, flags: tuple[str, ...] = ()) -> str:
    return f"small_ep{ep}_rank{rank}{''.join('_' + f for f in flags)}.{direction}"


def golden_schedule(ep: int, rank: int, direction: str, flags: tuple[str, ...] = ()):
    cfg = make_config(None, dict(GOLDEN_CONFIG, ep=ep, **{f: True for f in flags}))
    (schedule,) = compile_schedules(cfg, [direction], [rank])
    return schedule


def main() -> None:
    for case in GOLDEN_FILES:
        s = golden_schedule(*case)
        name = golden_name(*case)
        ssc_io.write(s, HERE / f"{name}.ssc")
        (HERE / f"{name}.json").write_text(json.dumps(to_json(s), indent=1, sort_keys=True) + "\n")
        print(f"wrote {name}.ssc and {name}.json")


if __name__ == "__main__":
    main()
