"""Helpers of the AscendC-on-CPU tests: one case run on a backend, ranks as threads."""
from __future__ import annotations

from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config
from hpmoe.reference import moe_reference
from hpmoe.runtime.routing import bucket_for, make_routing
from hpmoe.runtime.twin import CpuTwin, make_inputs


def case(routing: str = "random", seed: int = 0, **overrides):
    """(cfg with a bucket that fits, inputs, float64 reference, compiled schedules) on the small preset."""
    cfg = make_config("small", overrides)
    ids, weights = make_routing(cfg, routing, seed)
    if "recv_rows_per_src" not in overrides:
        cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, ids))
    inputs = make_inputs(cfg, ids, weights, seed)
    ref = moe_reference(inputs.x, inputs.w1, inputs.w2, inputs.topk_ids, inputs.topk_weights, inputs.dy)
    return cfg, inputs, ref, compile_schedules(cfg, ["fwd", "bwd"], list(range(cfg.ep)))


def window_garbage(heap) -> None:
    """Puts the garbage the ascendc-cpu library's windows start with into every slot of `heap` (a CPU-twin heap:
    its counters stay zero), so rows neither backend writes compare equal."""
    import ctypes

    from hpmoe.runtime import native

    L = ctypes.CDLL(str(native.library_path("ascendc-cpu")))
    L.hpmoe_ascendc_window_garbage.argtypes = [ctypes.c_void_p, ctypes.c_uint32] + [ctypes.c_uint64] * 3
    first_slot = min(offset for offset, _, _ in heap.layout.slots.values())
    L.hpmoe_ascendc_window_garbage(heap.base, heap.ep, heap.layout.segment_bytes, first_slot,
                                   heap.layout.counter_offsets[0])


def run(backend: str, cfg, inputs, schedules, iterations: int = 1, log_dir=None, garbage=False):
    """fwd+bwd `iterations` times; returns (float64 outputs, raw output bits, extras: every slot of every rank
    copied after the run, the heap base and segment size). garbage: the CPU twin's slots start with the
    ascendc-cpu windows' garbage (those windows always do)."""
    with CpuTwin(cfg, schedules, timeout_s=20.0, backend=backend) as twin:
        if garbage and backend == "cpu":
            window_garbage(twin.heap)
        twin.load_inputs(inputs)
        for it in range(iterations):
            for d in ("fwd", "bwd"):
                if log_dir is None:
                    twin.run_threads(d)
                else:
                    if not twin.ranks:
                        twin.open_ranks()
                    from hpmoe.runtime import native
                    native.run(twin.ranks, d, log_path=str(log_dir / f"{d}{it}.log"))
        from hpmoe.ssc_format import Slot
        slots = {s: [twin.heap.view(r, s).copy() for r in range(cfg.ep)] for s in Slot}
        return twin.outputs(), twin.raw_outputs(), {"ret_y": slots[Slot.RET_Y], "slots": slots,
                                                     "heap_base": twin.heap.base,
                                                     "segment_bytes": twin.layout.segment_bytes}
