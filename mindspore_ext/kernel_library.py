"""The aot kernel shim (mindspore_ext/kernels, built by ./build.sh into <build>/mindspore_ext/) and its
host-side binding: which loaded rank and heap segment a context id refers to."""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from hpmoe.errors import HpmoeError
from hpmoe.runtime import native

LIB_NAME = "libhpmoe_ms_kernels.so"


def kernel_library_path() -> Path:
    """$HPMOE_MS_KERNELS, else <build>/mindspore_ext/libhpmoe_ms_kernels.so (<build>: $HPMOE_BUILD_DIR or build/)."""
    return native.built_library("HPMOE_MS_KERNELS", f"mindspore_ext/{LIB_NAME}").resolve()


_LIB = None


def kernel_library() -> ctypes.CDLL:
    global _LIB
    if _LIB is None:
        path = kernel_library_path()
        if not path.exists():
            raise HpmoeError(f"hpmoe.mindspore: aot kernel library not found at {path}: run ./build.sh setup")
        lib = ctypes.CDLL(str(path))
        vp = ctypes.c_void_p
        pu64 = ctypes.POINTER(ctypes.c_uint64)
        lib.hpmoe_ms_bind.argtypes = [ctypes.c_int32, vp, vp, vp, pu64, pu64, ctypes.c_uint32,
                                      ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(vp)]
        lib.hpmoe_ms_unbind.argtypes = [ctypes.c_int32]
        lib.hpmoe_ms_pending_on.argtypes = [vp]
        lib.hpmoe_ms_heap_reset.argtypes = [vp]
        lib.hpmoe_ms_heap_reset.restype = None
        lib.hpmoe_ms_stash_bytes.argtypes = [ctypes.c_int32]
        lib.hpmoe_ms_stash_bytes.restype = ctypes.c_uint64
        _LIB = lib
    return _LIB


def aot_name(function: str) -> str:
    """What ops.Custom(func_type="aot") takes: "<library path>:<function>"."""
    return f"{kernel_library_path()}:{function}"


def bind(context_id: int, session, plan) -> None:
    """Point context `context_id` of the shim at the session's active rank and heap segment and at this call's
    routing plan (`plan`: topk_ids, send_rows, send_counts, token_rows; the caller keeps them alive)."""
    cfg = session.active.bucket.cfg
    offsets = np.ascontiguousarray(session.slot_offsets(), np.uint64)
    nbytes = np.ascontiguousarray(session.slot_bytes(), np.uint64)
    dims = np.array([cfg.tokens, cfg.hidden, cfg.inter, cfg.experts_per_rank, cfg.topk], np.int64)
    run_fn = ctypes.cast(native.lib().hpmoe_cpu_run, ctypes.c_void_p)
    pointers = (ctypes.c_void_p * 4)(*[a.ctypes.data for a in plan])
    u64 = ctypes.POINTER(ctypes.c_uint64)
    rc = kernel_library().hpmoe_ms_bind(
        context_id, session.active.handle.handle, run_fn, session.segment_base(), offsets.ctypes.data_as(u64),
        nbytes.ctypes.data_as(u64), int(cfg.dtype_enum), dims.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)),
        pointers)
    if rc:
        raise HpmoeError(f"hpmoe.mindspore: context id {context_id} out of range")


def pending_on(segment: int) -> int:
    """Layers bound to this heap segment whose backward has not run yet."""
    return kernel_library().hpmoe_ms_pending_on(segment)


def heap_created(segment: int) -> None:
    kernel_library().hpmoe_ms_heap_reset(segment)


def stash_bytes(context_id: int) -> int:
    """Bytes a layer holds in its stash (its saved state copied out while another layer used the heap)."""
    return kernel_library().hpmoe_ms_stash_bytes(context_id)


def unbind(context_id: int) -> None:
    if _LIB is not None:
        _LIB.hpmoe_ms_unbind(context_id)
