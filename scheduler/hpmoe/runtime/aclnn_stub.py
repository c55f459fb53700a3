"""The op's aclnn two-phase API as the CPU stub runner implements it (op_host/ascend/stub_runner/aclnn_api.cpp,
in libhpmoe_ascendc_cpu.so), through ctypes: what the AscendC tests and the MindSpore route's CPU stand-in call
in place of CANN's generated aclnnHyperParallelMoeGetWorkspaceSize / aclnnHyperParallelMoe. Nothing here
touches an NPU."""
from __future__ import annotations

import ctypes

import numpy as np

from . import native


class AclTensor(ctypes.Structure):  # the stub's stand-in for aclTensor: data pointer and shape
    _fields_ = [("data", ctypes.c_void_p), ("dims", ctypes.c_int64 * 4), ("ndim", ctypes.c_uint32),
                ("reserved", ctypes.c_uint32)]


def acl(a: np.ndarray | None):
    """None stays None (an absent optional input); arrays must be C-contiguous with at most 4 dims."""
    if a is None:
        return None
    if not a.flags.c_contiguous or a.ndim > 4:
        raise native.RuntimeFailure(f"aclnn stub: tensors must be contiguous with at most 4 dims, got {a.shape}")
    return ctypes.pointer(AclTensor(a.ctypes.data, (ctypes.c_int64 * 4)(*a.shape), a.ndim, 0))


_LIB = None


def lib() -> ctypes.CDLL:
    global _LIB
    if _LIB is None:
        L = ctypes.CDLL(str(native.library_path("ascendc-cpu")))
        P = ctypes.POINTER(AclTensor)
        L.aclnnHyperParallelMoeGetWorkspaceSize.argtypes = (
            [P] * 11 + [ctypes.c_char_p] + [ctypes.c_int64] * 6 + [P] * 5 +
            [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_void_p)])
        L.aclnnHyperParallelMoe.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
        L.hpmoe_stub_hccl_group.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64]
        L.hpmoe_aclnn_last_error.restype = ctypes.c_char_p
        _LIB = L
    return _LIB


def register_group(name: str, base: int, ep: int, segment_bytes: int) -> None:
    """Stands for the communicator the framework created for `name`: rank r's window is base + r * segment."""
    if lib().hpmoe_stub_hccl_group(name.encode(), base, ep, segment_bytes):
        raise native.RuntimeFailure(lib().hpmoe_aclnn_last_error().decode())


def call(inputs: tuple, outputs: tuple, attr_values: tuple) -> None:
    """Both phases, as CANN's generated API is called: size the workspace, allocate it, launch. inputs and
    outputs in the op's order (numpy arrays, None for an absent optional input); attr_values in the OpDef's
    order (group first). Raises RuntimeFailure with the stub's one line."""
    L = lib()
    size, executor = ctypes.c_uint64(), ctypes.c_void_p()
    if L.aclnnHyperParallelMoeGetWorkspaceSize(*[acl(t) for t in inputs], attr_values[0].encode(),
                                               *attr_values[1:], *[acl(t) for t in outputs], ctypes.byref(size),
                                               ctypes.byref(executor)):
        raise native.RuntimeFailure(L.hpmoe_aclnn_last_error().decode())
    workspace = np.empty(size.value, np.uint8)
    if L.aclnnHyperParallelMoe(workspace.ctypes.data, size.value, executor, None):
        raise native.RuntimeFailure(L.hpmoe_aclnn_last_error().decode())
