"""HyperParallelMoEFFN through its NPU route, on CPU: the device check, the op package check, the communicator
and ops.Custom("HyperParallelMoe", func_type="aot") are mocked; the op is replaced by a stand-in that calls the
CPU stub runner's aclnn two-phase API (hpmoe.runtime.aclnn_stub) with the inputs and attributes the route gives
it, so the cell's host steps, epochs, nonce and bprop run for real around the stub-compiled AscendC kernel.
Checked: y and the four gradients against float64 (runtime/tolerances.py) and y, dx, dw1, dw2 bitwise against
the cell's CPU-twin path (d topk_weights is not bitwise between the kernel and the twin: docs/ascend.md,
"Numerics"); the launches went through the stand-in, with the epochs the route counted. Nothing runs on an NPU."""
from __future__ import annotations

import ctypes
import itertools
import time

import numpy as np
import pytest

import mindspore as ms
from mindspore import nn, ops
from mindspore.common import dtype as mstype

from hpmoe.errors import HpmoeError, InputError, RoutingError
from hpmoe.mindspore import HyperParallelMoEFFN, ascend, ascend_route, host_state, moe_ffn, npu_host
from hpmoe.runtime import aclnn_stub, native
from ms_cases import MS_DTYPES, errors, float64_reference, group_inputs, run_cell

T, H, I, E, K = 45, 32, 16, 4, 2
MODES = {"pynative": ms.PYNATIVE_MODE, "graph": ms.GRAPH_MODE}
_names = itertools.count()


class AclnnStandIn(nn.Cell):
    """What ops.Custom("HyperParallelMoe", func_type="aot") does on an NPU, done on CPU: one pyfunc per
    direction (dy absent in forward) calling aclnnHyperParallelMoeGetWorkspaceSize + aclnnHyperParallelMoe of
    the stub runner with the op's inputs, outputs and attribute values in the OpDef's order."""

    def __init__(self, attrs: ascend_route.AclnnAttrs, launches: list, hosts: list):
        super().__init__()
        values = attrs.values()

        def launch(inputs):
            x, w1, w2, _, weights = inputs[:5]
            if attrs.direction == 0:
                time.sleep(0.05)  # a slow forward: a backward not ordered after it would overtake it
            else:  # the windows hold the saved state of the forward whose plan ran last: it must have run
                done = max((e for d, e in launches if d == 0), default=0)
                if done != hosts[-1].epochs[0]:
                    raise RuntimeError(f"backward launched after forward {done} but before forward "
                                       f"{hosts[-1].epochs[0]}, whose plan it was given")
            outs = (np.zeros_like(x), np.zeros_like(x), np.zeros(w1.shape, np.float32),
                    np.zeros(w2.shape, np.float32), np.zeros(weights.shape, np.float32))
            aclnn_stub.call(tuple(None if a is None else np.ascontiguousarray(a) for a in inputs), outs, values)
            launches.append((attrs.direction, int(inputs[-1][0])))
            return outs

        f32 = mstype.float32
        shape = lambda x, w1, w2, ids, w, *rest: (x, x, w1, w2, w)  # noqa: E731 - the op's InferShape
        dtype = lambda x, w1, w2, ids, w, *rest: (x, x, f32, f32, f32)  # noqa: E731 - its InferDataType
        # pyfunc needs a fixed arity (a *args function is read as one tuple input).
        def forward(x, w1, w2, ids, w, send_rows, send_counts, token_rows, ssc, epoch):
            return launch((x, w1, w2, ids, w, None, send_rows, send_counts, token_rows, ssc, epoch))

        def backward(x, w1, w2, ids, w, dy, send_rows, send_counts, token_rows, ssc, epoch):
            return launch((x, w1, w2, ids, w, dy, send_rows, send_counts, token_rows, ssc, epoch))

        self.forward = ops.Custom(forward, out_shape=shape, out_dtype=dtype, func_type="pyfunc")
        self.backward = ops.Custom(backward, out_shape=shape, out_dtype=dtype, func_type="pyfunc")

    def construct(self, x, w1, w2, ids, weights, dy, send_rows, send_counts, token_rows, ssc, epoch):
        if dy is None:
            return self.forward(x, w1, w2, ids, weights, send_rows, send_counts, token_rows, ssc, epoch)
        return self.backward(x, w1, w2, ids, weights, dy, send_rows, send_counts, token_rows, ssc, epoch)


@pytest.fixture(autouse=True)
def cpu_context():
    ms.set_context(device_target="CPU", mode=ms.PYNATIVE_MODE)
    yield
    ms.set_context(mode=ms.PYNATIVE_MODE)


@pytest.fixture
def npu_mocks(monkeypatch):
    """The route's view of an Ascend machine with the package installed and HCCL initialised, EP 1: the
    communicator each cell creates is a stub group over a heap of its bucket's layout, filled with garbage as
    HCCL windows may be. Returns the list of launches (direction, epoch) the stand-in saw."""
    launches, heaps, hosts = [], [], []
    monkeypatch.setattr(ascend, "on_ascend_device", lambda: True)
    monkeypatch.setattr(ascend, "ascend_op_installed", lambda: True)
    monkeypatch.setattr(moe_ffn.ep_group, "resolve_group", lambda group: ("hpmoe_ep", 1, 0))
    monkeypatch.setattr(npu_host, "AI_CORES", 1)  # the stub device has 25; 1 keeps the CPU threads few
    monkeypatch.setattr(npu_host, "create_window_group", lambda group: f"hpmoe_moe_test{next(_names)}")
    monkeypatch.setattr(ascend_route, "build_custom_op", lambda attrs, bprop=None: AclnnStandIn(attrs, launches, hosts))
    real_init = npu_host.NpuHostState.__init__

    def init_and_register(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        heap = native.GroupHeap(native.HeapLayout(self.cfg, *self.bucket.counters), None)
        ctypes.memset(heap.base, 0xA5, heap.nbytes)
        aclnn_stub.register_group(self.window_group, heap.base, self.ep, heap.layout.segment_bytes)
        heaps.append(heap)
        hosts.append(self)

    monkeypatch.setattr(npu_host.NpuHostState, "__init__", init_and_register)
    yield launches
    for heap in heaps:
        heap.close()


def twin_cell(monkeypatch, dtype):
    """The same cell on its CPU-twin path with the NPU route's worker split (1 AIC, 2 AIV): the same SSCs."""
    monkeypatch.setattr(host_state, "WORKERS_AIC", 1)
    monkeypatch.setattr(host_state, "WORKERS_AIV", 2)
    return HyperParallelMoEFFN(H, I, E, K, dtype=MS_DTYPES[dtype])


@pytest.mark.parametrize("mode, dtype, routing", [("pynative", "fp32", "skewed"), ("graph", "fp32", "random"),
                                                  ("pynative", "fp16", "empty")])
def test_forward_and_backward_through_the_route(npu_mocks, monkeypatch, mode, dtype, routing):
    ms.set_context(mode=MODES[mode])
    inputs = group_inputs(1, T, H, I, E, K, routing, dtype, seed=7)
    cell = HyperParallelMoEFFN(H, I, E, K, dtype=MS_DTYPES[dtype], tokens=T)
    assert isinstance(cell.state, npu_host.NpuHostState)
    got = run_cell(cell, inputs, 0, dtype)
    # run_cell: one forward for y, then forward + backward under ms.grad; every one a stand-in launch.
    assert npu_mocks == [(0, 1), (0, 2), (1, 1)], npu_mocks
    assert cell.state.epochs == [2, 1]
    for name, (err, tol) in errors(got, float64_reference(inputs, 0), dtype).items():
        assert err <= tol, f"{mode} {dtype} {routing}: {name} vs float64: {err:.2e} > {tol:.1e}"
    again = run_cell(cell, inputs, 0, dtype)  # epochs 3, 4 / 2 on the same windows: the same bits
    assert npu_mocks[3:] == [(0, 3), (0, 4), (1, 2)], npu_mocks
    for name in got:
        assert np.array_equal(got[name], again[name]), f"{mode} {dtype} {routing}: {name} changed on a repeat"
    monkeypatch.setattr(ascend, "on_ascend_device", lambda: False)
    twin = run_cell(twin_cell(monkeypatch, dtype), inputs, 0, dtype)
    for name in ("y", "dx", "dw1", "dw2"):
        a, b = got[name], twin[name]
        assert np.array_equal(a, b), (f"{mode} {dtype} {routing}: {name}: {np.count_nonzero(a != b)} elements "
                                      f"differ from the CPU twin's path")


def test_routing_beyond_the_bucket_is_refused_in_one_line(npu_mocks):
    inputs = group_inputs(1, T, H, I, E, K, "skewed", "fp32", seed=1)
    cell = HyperParallelMoEFFN(H, I, E, K, capacity_factor=0.5, tokens=T)  # C holds about half the T*k rows
    x = ms.Tensor(inputs["x"][0].astype(np.float32))
    with pytest.raises(RoutingError, match="does not grow it") as err:
        cell(x, ms.Tensor(inputs["topk_ids"][0]), ms.Tensor(inputs["topk_weights"][0]))
    assert "\n" not in str(err.value) and npu_mocks == []
    assert cell.state.epochs == [0, 0]


def test_the_route_needs_tokens_and_hccl(npu_mocks, monkeypatch):
    with pytest.raises(InputError, match="needs tokens=") as err:
        HyperParallelMoEFFN(H, I, E, K)
    assert "\n" not in str(err.value)
    monkeypatch.setattr(moe_ffn.ep_group, "resolve_group", lambda group: (None, 1, 0))
    with pytest.raises(InputError, match="collectives \\(HCCL\\) initialised") as err:
        HyperParallelMoEFFN(H, I, E, K, tokens=T)
    assert "\n" not in str(err.value)


def test_ascend_without_the_package_refuses_naming_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(ascend, "on_ascend_device", lambda: True)
    monkeypatch.setenv("ASCEND_CUSTOM_OPP_PATH", str(tmp_path))  # a vendor folder without the op
    with pytest.raises(HpmoeError, match="aclnnHyperParallelMoe is not installed") as err:
        HyperParallelMoEFFN(H, I, E, K, tokens=T)
    message = str(err.value)
    assert "\n" not in message and "op_host/ascend" in message and "ASCEND_CUSTOM_OPP_PATH" in message


def test_window_nonce_is_rank_zeros_draw_shared_exactly(monkeypatch):
    """EP 4 without msrun: the AllGather is replaced by the stack of four ranks' halves; every rank must end
    with rank 0's 62-bit draw, bit for bit (the int31 split must not lose the top bits)."""
    draws = [2 ** 62 - 1, 5, 2 ** 40 + 3, 1]

    class Gather:
        def __init__(self, group):
            assert group == "ep4"

        def __call__(self, t):
            halves = [[d & 0x7FFFFFFF, d >> 31] for d in draws]
            return ms.Tensor(np.array(halves, np.int32))

    monkeypatch.setattr(ops, "AllGather", Gather)
    monkeypatch.setattr(npu_host, "draw_window_nonce", lambda: draws[2])
    assert npu_host.agree_window_nonce("ep4", 4) == draws[0]
