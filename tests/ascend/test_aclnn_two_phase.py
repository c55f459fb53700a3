"""The aclnn two-phase API of the op (aclnnHyperParallelMoeGetWorkspaceSize, then aclnnHyperParallelMoe) on
the CPU stubs, called with exactly the inputs and attributes the MindSpore NPU route passes
(hpmoe.mindspore.ascend_route): phase one runs the op package's own tiling function, phase two launches the
stub-compiled kernel on the caller's tensors (numpy arrays outside the windows) and the group's garbage-filled
windows. Forward + backward of an EP-2 group, ranks as threads: within the float64 tolerances and bitwise equal
to the CPU twin (y, dx, dw1, dw2)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from ascend_helpers import case, run
from hpmoe.runtime import aclnn_stub, native
from hpmoe.runtime.dtypes import to_float64, to_storage
from hpmoe.runtime.routing import plan_rank
from hpmoe.runtime.tolerances import compare
from hpmoe.runtime.twin import CpuTwin
from hpmoe.ssc_format import Slot

ascend_route = pytest.importorskip("hpmoe.mindspore.ascend_route")


def _call(inputs: tuple, outputs: tuple, attrs) -> None:
    aclnn_stub.call(inputs, outputs, attrs.values())


def test_forward_and_backward_through_the_two_phase_api():
    cfg, inputs, ref, schedules = case("skewed", seed=17, dtype="bf16", ep=2, topk=2)
    _, twin_bits, _ = run("cpu", cfg, inputs, schedules)
    nonce = ascend_route.draw_window_nonce()
    with CpuTwin(cfg, schedules, backend="ascendc-cpu") as group:  # only its heap: the group's windows
        aclnn_stub.register_group("hpmoe_ep", group.heap.base, cfg.ep, group.layout.segment_bytes)
        counters = group.layout.counters
        dt = cfg.dtype
        T, h, I, E, k = cfg.tokens, cfg.hidden, cfg.inter, cfg.experts_per_rank, cfg.topk
        outs = [dict(y=np.empty((T, h), to_storage(np.zeros(1), dt).dtype),
                     dx=np.empty((T, h), to_storage(np.zeros(1), dt).dtype),
                     dw1=np.empty((E, h, 2 * I), np.float32), dw2=np.empty((E, I, h), np.float32),
                     dtopk_weights=np.empty((T, k), np.float32)) for _ in range(cfg.ep)]
        tensors = []
        for r in range(cfg.ep):
            plan = plan_rank(cfg, inputs.topk_ids[r])
            tensors.append(dict(
                x=to_storage(inputs.x[r], dt), w1=to_storage(inputs.w1[r], dt), w2=to_storage(inputs.w2[r], dt),
                topk_ids=np.ascontiguousarray(inputs.topk_ids[r], np.int32),
                topk_weights=np.ascontiguousarray(inputs.topk_weights[r], np.float32),
                dy=to_storage(inputs.dy[r], dt), send_rows=plan.send_rows, send_counts=plan.send_counts,
                token_rows=plan.token_rows.reshape(T, k),
                ssc={d: np.frombuffer(group.ssc[d][r], np.uint8).copy() for d in ("fwd", "bwd")}))
        errors = []

        def rank_call(r, direction):
            t = tensors[r]
            attrs = ascend_route.AclnnAttrs("hpmoe_ep", r, direction, counters[0], counters[1], nonce, 20000)
            ins = ascend_route.aclnn_inputs(t["x"], t["w1"], t["w2"], t["topk_ids"], t["topk_weights"],
                                            t["dy"] if direction else None, t["send_rows"], t["send_counts"],
                                            t["token_rows"], t["ssc"]["bwd" if direction else "fwd"],
                                            np.array([1], np.int64))
            try:
                _call(ins, tuple(outs[r][n] for n in ascend_route.OUTPUTS), attrs)
            except native.RuntimeFailure as exc:
                errors.append(str(exc))

        for direction in (0, 1):  # every rank's launch runs at once: the kernels wait on each other
            threads = [threading.Thread(target=rank_call, args=(r, direction)) for r in range(cfg.ep)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            assert not errors, errors
    got = {n: np.stack([o[n] for o in outs]) for n in ascend_route.OUTPUTS}
    as64 = {n: to_float64(v, dt if n in ("y", "dx") else "fp32") for n, v in got.items()}
    failed = [row for row in compare(as64, ref, dt) if not row[3]]
    assert not failed, failed
    for name in ("y", "dx", "dw1", "dw2"):
        a, b = twin_bits[name], got[name]
        assert a.tobytes() == b.tobytes(), f"{name}: {np.count_nonzero(a != b)} elements differ from the twin"


def test_phase_one_refuses_a_call_the_op_cannot_run():
    cfg, inputs, _, schedules = case("random", seed=2, dtype="fp32", ep=1, topk=2)
    with CpuTwin(cfg, schedules, backend="ascendc-cpu") as group:
        aclnn_stub.register_group("hpmoe_one", group.heap.base, 1, group.layout.segment_bytes)
        plan = plan_rank(cfg, inputs.topk_ids[0])
        x = np.zeros((cfg.tokens, cfg.hidden), np.float32)
        ins = ascend_route.aclnn_inputs(x, np.zeros((cfg.experts_per_rank, cfg.hidden, 2 * cfg.inter), np.float32),
                                        np.zeros((cfg.experts_per_rank, cfg.inter, cfg.hidden), np.float32),
                                        np.ascontiguousarray(inputs.topk_ids[0], np.int32),
                                        np.ascontiguousarray(inputs.topk_weights[0], np.float32), None,
                                        plan.send_rows, plan.send_counts, plan.token_rows.reshape(cfg.tokens, -1),
                                        np.frombuffer(group.ssc["fwd"][0], np.uint8).copy(), np.array([1], np.int64))
        outs = tuple(np.zeros(1, np.float32) for _ in ascend_route.OUTPUTS)
        c = group.layout.counters
        with pytest.raises(native.RuntimeFailure, match="tiling function refused"):  # window_nonce 0
            _call(ins, outs, ascend_route.AclnnAttrs("hpmoe_one", 0, 0, c[0], c[1], 0))
        with pytest.raises(native.RuntimeFailure, match="no communicator named 'elsewhere'"):
            _call(ins, outs, ascend_route.AclnnAttrs("elsewhere", 0, 0, c[0], c[1], 5))
