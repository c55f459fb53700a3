"""One rank of an msrun launch of the MindSpore tests: many cases in one launch (a launch costs ~24 s here).
Writes <out>/rank<r>.json: per case, each output's error against float64 and against the standard path
(ReferenceMoEFFN with its AllGather token exchange), plus bitwise-repeat and bucket-growth checks.
Usage: msrun --worker_num N --local_worker_num N ... msrun_worker.py OUT_DIR"""
from __future__ import annotations

import json
import logging
import sys
import traceback
from pathlib import Path

import numpy as np

import mindspore as ms
from mindspore.communication import get_group_size, get_rank, init
from mindspore.communication.management import GlobalComm

sys.path.insert(0, str(Path(__file__).parent))
from ms_cases import MS_DTYPES, errors, float64_reference, group_inputs, run_cell, run_standard  # noqa: E402

T, H, I, E, K = 45, 32, 16, 2, 2  # T not a multiple of the 16-row tiles
CASES = [("pynative", "fp32", "balanced"), ("pynative", "fp32", "skewed"), ("pynative", "fp16", "empty"),
         ("pynative", "bf16", "random"), ("graph", "fp32", "skewed"), ("graph", "fp16", "balanced")]
MODES = {"pynative": ms.PYNATIVE_MODE, "graph": ms.GRAPH_MODE}


class _GrowthLog(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def main(out_dir: str) -> int:
    ms.set_context(device_target="CPU")
    init()
    from hpmoe.mindspore import HyperParallelMoEFFN
    from hpmoe.mindspore.reference import ReferenceMoEFFN

    ep, rank, group = get_group_size(), get_rank(), GlobalComm.WORLD_COMM_GROUP
    growth = _GrowthLog()
    logging.getLogger("hpmoe").addHandler(growth)
    result = {"ep": ep, "rank": rank, "cases": [], "error": None}
    try:
        for mode, dtype, routing in CASES:
            ms.set_context(mode=MODES[mode])
            inputs = group_inputs(ep, T, H, I, E, K, routing, dtype, seed=11)
            cell = HyperParallelMoEFFN(H, I, E, K, dtype=MS_DTYPES[dtype])
            got = run_cell(cell, inputs, rank, dtype)
            again = run_cell(cell, inputs, rank, dtype)
            standard = run_standard(ReferenceMoEFFN(E, K, ep=ep, rank=rank, group=group), inputs, rank, dtype)
            result["cases"].append({
                "case": f"{mode} {dtype} {routing}", "vs_float64": errors(got, float64_reference(inputs, rank), dtype),
                "vs_standard": errors(got, standard, dtype),
                "bitwise_repeat": all(np.array_equal(got[n], again[n]) for n in got)})
        # Growth: a bucket of a quarter of the balanced load overflows; every rank must pick the same C.
        ms.set_context(mode=ms.PYNATIVE_MODE)
        result["growth_in_cases"] = list(growth.messages)  # skewed cases may outgrow the default bucket too
        growth.messages.clear()
        inputs = group_inputs(ep, T, H, I, E, K, "skewed", "fp32", seed=12)
        cell = HyperParallelMoEFFN(H, I, E, K, capacity_factor=0.25)
        got = run_cell(cell, inputs, rank, "fp32")
        run_cell(cell, inputs, rank, "fp32")  # same bucket again: no second message
        result["growth"] = {"messages": growth.messages,
                            "capacity": cell.state.session(T).capacity,
                            "vs_float64": errors(got, float64_reference(inputs, rank), "fp32")}
    except Exception as exc:  # reported to the test through the json, with the traceback on stderr
        traceback.print_exc()
        result["error"] = f"{type(exc).__name__}: {exc}"
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
