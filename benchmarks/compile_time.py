"""Compile time of the static scheduler: `python benchmarks/compile_time.py [--preset deepseek-v3] [--ep 16]`.

Measures, side by side in one run, the median and the minimum of --repeat runs of:
- one rank, forward + backward (target <= 100 ms for deepseek-v3 EP16), without and with the rank-local
  validator (which `hpmoe compile --rank R` runs);
- all ranks, forward + backward (target <= 1 s for 16 ranks), without and with the whole-group validator;
- serialising every SSC to bytes;
- the C++ load-time validator every backend's loader runs (op_host/ssc_loader.h, through the C ABI of
  build/op_host/cpu/libhpmoe_cpu.so) on one rank's two files and on the whole group's files, with its cost as a
  share of the compile it checks (target < 10%).
"""
from __future__ import annotations

import argparse
import statistics
import time

from hpmoe import ssc_io
from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config
from hpmoe.runtime import native
from hpmoe.validate import check


def timed(fn, repeat: int) -> tuple[float, float]:
    """(median, min) seconds: on a shared machine the minimum is the best estimate of the code's own cost."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), min(samples)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="deepseek-v3")
    p.add_argument("--ep", type=int, default=16)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    cfg = make_config(args.preset, {"ep": args.ep})
    ranks = list(range(cfg.ep))

    def one_rank_compile():
        return compile_schedules(cfg, ["fwd", "bwd"], [0])

    def one_rank():
        s = one_rank_compile()
        for d in ("fwd", "bwd"):
            check([x for x in s if x.direction_name == d], group=False)

    def all_ranks():
        return compile_schedules(cfg, ["fwd", "bwd"], ranks)

    schedules = all_ranks()

    def group_verify():
        for d in ("fwd", "bwd"):
            check([x for x in schedules if x.direction_name == d], group=True)

    def serialise():
        return [ssc_io.to_bytes(s) for s in schedules]

    blobs = {d: [ssc_io.to_bytes(s) for s in schedules if s.direction_name == d] for d in ("fwd", "bwd")}

    def load_validate_one_rank():
        for d in ("fwd", "bwd"):
            assert native.validate_ssc(blobs[d][:1]) == ("", cfg.ep == 1)

    def load_validate_group():
        for d in ("fwd", "bwd"):
            assert native.validate_ssc(blobs[d]) == ("", True)

    tasks = sum(len(s.tasks) for s in schedules)
    print(f"{args.preset} EP{cfg.ep}: {tasks} tasks in {len(schedules)} SSCs (fwd+bwd), {args.repeat} runs: "
          f"median / min")
    rows = [("one rank, fwd+bwd, compile", timed(one_rank_compile, args.repeat), 0.100),
            ("one rank, fwd+bwd, compile + rank-local validation", timed(one_rank, args.repeat), 0.100),
            (f"all {cfg.ep} ranks, fwd+bwd, compile", timed(all_ranks, args.repeat), 1.0),
            (f"all {cfg.ep} ranks, fwd+bwd, whole-group validation", timed(group_verify, max(1, args.repeat // 2)), None),
            (f"all {cfg.ep} ranks, serialise to SSC bytes", timed(serialise, args.repeat), None)]
    one_cpp, group_cpp = timed(load_validate_one_rank, args.repeat), timed(load_validate_group, args.repeat)
    rows += [("C++ load-time validator, one rank's fwd+bwd files", one_cpp, None),
             (f"C++ load-time validator, all {cfg.ep} ranks' files + group", group_cpp, None)]
    for name, (median, best), target in rows:
        verdict = "" if target is None else \
            f"  (target {target * 1000:.0f} ms: {'met' if median <= target else 'MISSED'} by the median)"
        print(f"  {name:<58} {median * 1000:8.1f} / {best * 1000:8.1f} ms{verdict}")
    for name, (cpp, _), (comp, _) in (("one rank", one_cpp, rows[0][1]), (f"all {cfg.ep} ranks", group_cpp, rows[2][1])):
        share = cpp / comp
        print(f"  C++ validator / compile, {name}: {share * 100:.1f}% of the median compile "
              f"(target < 10%: {'met' if share < 0.10 else 'MISSED'})")


if __name__ == "__main__":
    main()
