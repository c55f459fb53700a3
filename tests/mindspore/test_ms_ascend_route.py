"""The NPU route of hpmoe.mindspore, without an NPU: the route choice is explicit (the CPU twin unless the
device is Ascend and the op package is installed), and the Custom op is built with the op's name, func_type
"aot", its 11 inputs (dy optional), 5 outputs and every attribute with its value. The device check is mocked;
nothing here runs on an NPU. The cell running through the route: test_ms_npu_route.py."""
from __future__ import annotations

import json

import pytest

ms = pytest.importorskip("mindspore")
from hpmoe.mindspore import ascend_route  # noqa: E402


def test_route_is_the_cpu_twin_here(monkeypatch):
    assert ms.get_context("device_target") == "CPU"
    assert not ascend_route.npu_route()
    monkeypatch.setattr(ascend_route.ascend, "ascend_op_installed", lambda: True)
    assert not ascend_route.npu_route()  # the package alone does not pick the NPU route


def test_npu_route_builds_the_aclnn_custom_op(monkeypatch):
    monkeypatch.setattr(ascend_route.ascend, "on_ascend_device", lambda: True)
    monkeypatch.setattr(ascend_route.ascend, "ascend_op_installed", lambda: True)
    assert ascend_route.npu_route()
    built = {}

    class RecordingCustom:
        def __init__(self, func, out_shape=None, out_dtype=None, func_type="pyfunc", bprop=None, reg_info=None):
            built.update(func=func, out_shape=out_shape, out_dtype=out_dtype, func_type=func_type, reg_info=reg_info)

    monkeypatch.setattr(ms.ops, "Custom", RecordingCustom)
    attrs = ascend_route.AclnnAttrs("ep_group", 3, 1, 120, 240, 0x5EED, 9000)
    ascend_route.build_custom_op(attrs)
    assert built["func"] == "HyperParallelMoe" and built["func_type"] == "aot"
    info = built["reg_info"] if isinstance(built["reg_info"], dict) else json.loads(built["reg_info"])
    assert info["op_name"] == "HyperParallelMoe" and info["target"] == "Ascend"
    assert [i["name"] for i in info["inputs"]] == list(ascend_route.INPUTS)
    assert [i["paramType"] for i in info["inputs"]] == ["optional" if n == "dy" else "required"
                                                          for n in ascend_route.INPUTS]
    assert [o["name"] for o in info["outputs"]] == list(ascend_route.OUTPUTS)
    got = {a["name"]: (a["type"], a["value"]) for a in info["attr"]}
    assert got == {"group": ("str", "ep_group"), "rank": ("int", 3), "direction": ("int", 1),
                   "counters_fwd": ("int", 120), "counters_bwd": ("int", 240), "window_nonce": ("int", 0x5EED),
                   "timeout_ms": ("int", 9000)}
    # The Python infer: y, dx like x; dw1, dw2 like w1, w2; dtopk_weights like topk_weights.
    x, w1, w2, ids, w = [4, 8], [2, 8, 12], [2, 6, 8], [4, 2], [4, 2]
    assert built["out_shape"](x, w1, w2, ids, w) == (x, x, w1, w2, w)
    f32 = ms.float32
    assert built["out_dtype"](ms.bfloat16, 0, 0, 0, 0)[2:] == (f32, f32, f32)


def test_aclnn_inputs_keep_the_op_order():
    args = [f"t{i}" for i in range(11)]
    assert ascend_route.aclnn_inputs(*args) == tuple(args)
    assert 0 < ascend_route.draw_window_nonce() < 2 ** 63
