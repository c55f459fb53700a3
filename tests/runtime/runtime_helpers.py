"""Helpers of the runtime tests: build a config + inputs, run the CPU twin, compare with float64."""
from __future__ import annotations

from hpmoe.config import make_config
from hpmoe.reference import moe_reference
from hpmoe.runtime.routing import bucket_for, make_routing
from hpmoe.runtime.twin import CpuTwin, make_inputs


def case(routing: str = "random", seed: int = 0, preset: str = "small", **overrides):
    """(cfg with a bucket that fits, inputs, reference outputs)."""
    cfg = make_config(preset, overrides)
    ids, weights = make_routing(cfg, routing, seed)
    if "recv_rows_per_src" not in overrides:
        cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, ids))
    inputs = make_inputs(cfg, ids, weights, seed)
    ref = moe_reference(inputs.x, inputs.w1, inputs.w2, inputs.topk_ids, inputs.topk_weights, inputs.dy)
    return cfg, inputs, ref


def run_threads(cfg, inputs, iterations: int = 1, timeout_s: float = 10.0, dynamic: bool = False):
    with CpuTwin(cfg, timeout_s=timeout_s) as twin:
        twin.load_inputs(inputs)
        for _ in range(iterations):
            twin.run_threads("fwd", dynamic)
            twin.run_threads("bwd", dynamic)
        return twin.outputs(), twin.raw_outputs()
