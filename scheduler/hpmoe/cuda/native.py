"""ctypes binding of the CUDA backend's C ABI (op_host/cuda/c_api.h).

The library is found at $HPMOE_CUDA_LIB, else <build>/op_host/cuda/libhpmoe_cuda.so with <build> from
$HPMOE_BUILD_DIR or the repository's build/ folder (built by CMake when nvcc is present, or by
op_host/cuda/build_lib.sh).
"""
from __future__ import annotations

import ctypes
from pathlib import Path

from ..errors import HpmoeError
from ..runtime.native import built_library

ERR_LEN = 1024


class CudaFailure(HpmoeError):
    """The CUDA backend refused a config or SSC, or a launch failed (timeout, handler error, CUDA error)."""


class CudaOptions(ctypes.Structure):
    _fields_ = [("timeout_ms", ctypes.c_uint64), ("fault_rank", ctypes.c_uint32), ("fault_mode", ctypes.c_uint32),
                ("fault_after", ctypes.c_uint32), ("trace", ctypes.c_uint32), ("plan", ctypes.c_uint32)]


class CudaPass(ctypes.Structure):
    """HpmoeCudaPass (c_api.h): when a launch runs and which tokens it takes (the speculative bucket at EP > 1)."""
    _fields_ = [("run_if", ctypes.c_uint32), ("token_begin", ctypes.c_uint32), ("token_end", ctypes.c_uint32),
                ("need_out", ctypes.c_uint64)]


# CudaPass.run_if (kRun* in device_rank.cuh)
RUN_IF = {"always": 0, "speculate": 1, "no_overflow": 2, "overflow": 3}


def library_path() -> Path:
    return built_library("HPMOE_CUDA_LIB", "op_host/cuda/libhpmoe_cuda.so")


_LIB = None


def lib() -> ctypes.CDLL:
    global _LIB
    if _LIB is None:
        path = library_path()
        if not path.exists():
            raise CudaFailure(f"CUDA backend library not found at {path}: build it with nvcc "
                              f"(./build.sh setup on a machine with nvcc, or op_host/cuda/build_lib.sh)")
        L = ctypes.CDLL(str(path))
        u32, u64, vp, cp, i32 = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
        pu32 = ctypes.POINTER(u32)
        L.hpmoe_cuda_device_count.argtypes = []
        if hasattr(L, "hpmoe_cuda_blocks_per_worker"):  # (a library built before the query: one block a worker)
            L.hpmoe_cuda_blocks_per_worker.argtypes = []
            L.hpmoe_cuda_blocks_per_worker.restype = u32
        pu64 = ctypes.POINTER(u64)
        L.hpmoe_cuda_group_create.argtypes = [pu32, u32, u32, ctypes.POINTER(ctypes.c_int32), u32, pu64, cp, i32]
        L.hpmoe_cuda_group_create.restype = vp
        L.hpmoe_cuda_rank_create.argtypes = [pu32, u32, u32, u32, ctypes.c_int32, u32, pu64, cp, i32]
        L.hpmoe_cuda_rank_create.restype = vp
        L.hpmoe_cuda_ipc_export.argtypes = [vp, ctypes.c_char_p, cp, i32]
        L.hpmoe_cuda_ipc_open.argtypes = [vp, u32, ctypes.c_char_p, cp, i32]
        L.hpmoe_cuda_group_destroy.argtypes = [vp]
        L.hpmoe_cuda_group_destroy.restype = None
        L.hpmoe_cuda_load.argtypes = [vp, u32, u32, cp, u64, cp, i32]
        L.hpmoe_cuda_write.argtypes = [vp, u32, u32, vp, u64, cp, i32]
        L.hpmoe_cuda_read.argtypes = [vp, u32, u32, vp, u64, cp, i32]
        L.hpmoe_cuda_run.argtypes = [vp, u32, ctypes.POINTER(CudaOptions), ctypes.POINTER(ctypes.c_float), cp, i32]
        L.hpmoe_cuda_launch.argtypes = [vp, u32, u32, vp, ctypes.POINTER(u64), u32, u32,
                                        ctypes.POINTER(CudaOptions), cp, i32]
        L.hpmoe_cuda_launch_timed.argtypes = [vp, u32, u32, vp, ctypes.POINTER(u64), u32, u32, u32,
                                              ctypes.POINTER(CudaOptions), cp, i32]
        L.hpmoe_cuda_launch_pass.argtypes = [vp, u32, u32, vp, ctypes.POINTER(u64), u32, u32, u32,
                                             ctypes.POINTER(CudaPass), ctypes.POINTER(CudaOptions), cp, i32]
        L.hpmoe_cuda_kernel_ms.argtypes = [vp, u32, u32, ctypes.POINTER(ctypes.c_float), cp, i32]
        L.hpmoe_cuda_poll.argtypes = [vp, cp, i32]
        L.hpmoe_cuda_segment_bytes.argtypes = [vp]
        L.hpmoe_cuda_segment_bytes.restype = u64
        L.hpmoe_cuda_num_tasks.argtypes = [vp, u32, u32]
        L.hpmoe_cuda_num_tasks.restype = u32
        L.hpmoe_cuda_trace.argtypes = [vp, u32, u32, ctypes.POINTER(u64), cp, i32]
        _LIB = L
    return _LIB


def gpu_unavailable_reason() -> str:
    """Why the CUDA backend cannot run here ("" if it can): the library or the GPU, named apart."""
    if not library_path().exists():
        return f"CUDA backend library not built ({library_path()})"
    try:
        count = int(lib().hpmoe_cuda_device_count())
    except (CudaFailure, OSError, AttributeError) as exc:
        return f"CUDA backend library at {library_path()} does not load or find a driver: {exc}"
    return "" if count > 0 else f"no GPU visible (the CUDA backend library {library_path()} loads, 0 devices)"


def gpu_count() -> int:
    """GPUs visible to the CUDA backend; 0 when the library, the driver or a GPU is missing."""
    try:
        return int(lib().hpmoe_cuda_device_count())
    except (CudaFailure, OSError, AttributeError):  # no library, no driver, or a stale build
        return 0


def blocks_per_worker() -> int:
    """Thread blocks per SSC worker in the loaded build: 2 where each worker is a 2-block cluster
    (-DHPMOE_CLUSTER_WORKER=1), else 1."""
    query = getattr(lib(), "hpmoe_cuda_blocks_per_worker", None)
    return int(query()) if query is not None else 1
