"""ctypes binding of the CPU twin's C ABI (op_host/cpu/c_api.h) and numpy views of the group heap.

The library is found at $HPMOE_CPU_LIB, else <build>/op_host/cpu/libhpmoe_cpu.so with <build> from
$HPMOE_BUILD_DIR or the repository's build/ folder (./build.sh builds it). `use_backend("ascendc-cpu")`
switches to <build>/op_host/ascend/libhpmoe_ascendc_cpu.so ($HPMOE_ASCENDC_CPU_LIB): the same heap and rank
ABI, with launches running the AscendC kernel on the project's stubs (op_host/ascend/stub_runner/c_api.cpp).
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np

from ..config import MoeConfig
from ..errors import HpmoeError
from ..graphs import tensor_specs
from ..ssc_format import CONFIG_FIELDS, DType, Slot

REPO = Path(__file__).resolve().parents[3]
ERR_LEN = 1024
DIRECTIONS = {"fwd": 0, "bwd": 1}
NP_DTYPES = {DType.FP32: np.float32, DType.FP16: np.float16, DType.BF16: np.uint16, DType.INT32: np.int32}


class RuntimeFailure(HpmoeError):
    """The CPU twin refused an SSC or a launch failed (timeout, dead peer, handler error)."""


class RankOptions(ctypes.Structure):
    _fields_ = [("timeout_ms", ctypes.c_uint64), ("handlers", ctypes.c_uint32), ("fault_mode", ctypes.c_uint32),
                ("fault_after", ctypes.c_uint32), ("fault_direction", ctypes.c_uint32)]


BACKENDS = {"cpu": ("HPMOE_CPU_LIB", "op_host/cpu/libhpmoe_cpu.so"),
            "ascendc-cpu": ("HPMOE_ASCENDC_CPU_LIB", "op_host/ascend/libhpmoe_ascendc_cpu.so")}
_BACKEND = "cpu"


def use_backend(name: str) -> None:
    """Selects the library every later call uses (`hpmoe run --backend`)."""
    global _BACKEND, _LIB
    if name not in BACKENDS:
        raise RuntimeFailure(f"unknown backend {name!r}; choose from {', '.join(BACKENDS)}")
    if name != _BACKEND:
        _BACKEND, _LIB = name, None


def current_backend() -> str:
    return _BACKEND


def built_library(env: str, relative: str) -> Path:
    """$env when set, else <build>/relative, <build> being $HPMOE_BUILD_DIR or the repository's build/ (every
    native library of the project is found this way)."""
    if os.environ.get(env):
        return Path(os.environ[env])
    return Path(os.environ.get("HPMOE_BUILD_DIR", REPO / "build")) / relative


def library_path(backend: str | None = None) -> Path:
    return built_library(*BACKENDS[backend or _BACKEND])


_LIB = None


def lib() -> ctypes.CDLL:
    global _LIB
    if _LIB is None:
        path = library_path()
        if not path.exists():
            raise RuntimeFailure(f"{_BACKEND} backend library not found at {path}: run ./build.sh setup")
        L = ctypes.CDLL(str(path))
        u32, u64, vp, cp = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_char_p
        pu32, pu64, i32 = ctypes.POINTER(u32), ctypes.POINTER(u64), ctypes.c_int
        L.hpmoe_cpu_layout.argtypes = [pu32, u32, u32, pu64, pu64, pu64, pu64, cp, i32]
        L.hpmoe_cpu_plan.argtypes = [u32, u32, u32, u32, u32, u32, vp, vp, vp, vp, pu32, ctypes.POINTER(ctypes.c_int64)]
        L.hpmoe_cpu_plan_range.argtypes = [u32, u32, u32, u32, u32, u32, u32, u32, vp, vp, vp, vp, pu32,
                                           ctypes.POINTER(ctypes.c_int64)]
        L.hpmoe_cpu_shm_create.argtypes = [cp, u64, cp, i32]
        L.hpmoe_cpu_shm_create.restype = vp
        L.hpmoe_cpu_shm_attach.argtypes = [cp, u64, cp, i32]
        L.hpmoe_cpu_shm_attach.restype = vp
        L.hpmoe_cpu_anon_create.argtypes = [u64, cp, i32]
        L.hpmoe_cpu_anon_create.restype = vp
        L.hpmoe_cpu_unmap.argtypes = [vp, u64]
        L.hpmoe_cpu_unmap.restype = None
        L.hpmoe_cpu_shm_unlink.argtypes = [cp]
        L.hpmoe_cpu_heap_init.argtypes = [vp, u32, u64]
        L.hpmoe_cpu_heap_init.restype = None
        L.hpmoe_cpu_heap_abort.argtypes = [vp, u32, u64, u32]
        L.hpmoe_cpu_heap_abort.restype = None
        L.hpmoe_cpu_rank_open.argtypes = [vp, u64, pu32, u32, u32, u32, cp, u64, cp, u64,
                                          ctypes.POINTER(RankOptions), cp, i32]
        L.hpmoe_cpu_rank_open.restype = vp
        L.hpmoe_cpu_rank_close.argtypes = [vp]
        L.hpmoe_cpu_rank_close.restype = None
        L.hpmoe_cpu_rank_set_tokens.argtypes = [vp, u32, u32]
        L.hpmoe_cpu_rank_set_tokens.restype = None
        L.hpmoe_cpu_run.argtypes = [ctypes.POINTER(vp), u32, u32, u32, cp, i32]
        if _BACKEND == "ascendc-cpu":
            L.hpmoe_ascendc_run.argtypes = [ctypes.POINTER(vp), u32, u32, cp, cp, i32]
        _LIB = L
    return _LIB


def config_words(cfg: MoeConfig) -> ctypes.Array:
    fields = cfg.ssc_fields()
    return (ctypes.c_uint32 * 16)(*([fields[n] for n in CONFIG_FIELDS] + [0, 0]))


class HeapLayout:
    """Offsets of every slot in one rank's segment (computed by the C++ side: one source of truth)."""

    def __init__(self, cfg: MoeConfig, counters_fwd: int, counters_bwd: int):
        self.cfg, self.counters = cfg, (counters_fwd, counters_bwd)
        offsets, nbytes = (ctypes.c_uint64 * len(Slot))(), (ctypes.c_uint64 * len(Slot))()
        counter_offsets, segment = (ctypes.c_uint64 * 2)(), ctypes.c_uint64()
        err = ctypes.create_string_buffer(ERR_LEN)
        if lib().hpmoe_cpu_layout(config_words(cfg), counters_fwd, counters_bwd, offsets, nbytes, counter_offsets,
                                  ctypes.byref(segment), err, ERR_LEN):
            raise RuntimeFailure(err.value.decode())
        self.segment_bytes = segment.value
        self.counter_offsets = tuple(counter_offsets)
        self.slots = {}
        for slot, spec in tensor_specs(cfg).items():
            np_dtype = NP_DTYPES[spec.dtype]
            shape = tuple(spec.shape)
            if int(np.prod(shape)) * np.dtype(np_dtype).itemsize != nbytes[slot]:
                raise RuntimeFailure(f"slot {slot.name}: scheduler and CPU twin disagree on its size")
            self.slots[slot] = (offsets[slot], shape, np_dtype)


class GroupHeap:
    """The symmetric heap of a whole EP group: POSIX shared memory (shm_name given) or anonymous memory."""

    def __init__(self, layout: HeapLayout, shm_name: str | None = None, create: bool = True):
        self.layout, self.shm_name = layout, shm_name
        self.ep = layout.cfg.ep
        self.nbytes = layout.segment_bytes * self.ep
        err = ctypes.create_string_buffer(ERR_LEN)
        L = lib()
        if shm_name is None:
            base = L.hpmoe_cpu_anon_create(self.nbytes, err, ERR_LEN)
        elif create:
            base = L.hpmoe_cpu_shm_create(shm_name.encode(), self.nbytes, err, ERR_LEN)
        else:
            base = L.hpmoe_cpu_shm_attach(shm_name.encode(), self.nbytes, err, ERR_LEN)
        if not base:
            raise RuntimeFailure(err.value.decode())
        self.base = base
        self.owner = create
        if create:
            L.hpmoe_cpu_heap_init(base, self.ep, layout.segment_bytes)

    def abort(self, failed_rank: int) -> None:
        """Mark the group failed on behalf of `failed_rank`: every worker stops at its next wait."""
        if self.base:
            lib().hpmoe_cpu_heap_abort(self.base, self.ep, self.layout.segment_bytes, failed_rank)

    def view(self, rank: int, slot: Slot) -> np.ndarray:
        offset, shape, np_dtype = self.layout.slots[slot]
        count = int(np.prod(shape))
        addr = self.base + rank * self.layout.segment_bytes + offset
        buf = (ctypes.c_uint8 * (count * np.dtype(np_dtype).itemsize)).from_address(addr)
        return np.frombuffer(buf, np_dtype, count).reshape(shape)

    def close(self) -> None:
        if self.base:
            lib().hpmoe_cpu_unmap(self.base, self.nbytes)
            self.base = None
            if self.shm_name is not None and self.owner:
                lib().hpmoe_cpu_shm_unlink(self.shm_name.encode())


class RankHandle:
    """One rank's loaded fwd/bwd SSCs on a group heap."""

    def __init__(self, heap: GroupHeap, rank: int, fwd: bytes | None, bwd: bytes | None,
                 options: RankOptions | None = None):
        layout = heap.layout
        err = ctypes.create_string_buffer(ERR_LEN)
        self.backend, self.lib = _BACKEND, lib()  # a rank stays with the library that opened it
        self.handle = self.lib.hpmoe_cpu_rank_open(
            heap.base, layout.segment_bytes, config_words(layout.cfg), layout.counters[0], layout.counters[1], rank,
            fwd, len(fwd or b""), bwd, len(bwd or b""), ctypes.byref(options or RankOptions(timeout_ms=30000)),
            err, ERR_LEN)
        if not self.handle:
            raise RuntimeFailure(err.value.decode())
        self.rank = rank

    def set_tokens(self, begin: int, end: int) -> None:
        """The tokens the rank's next launches reduce (a pass of the speculative bucket, whose plan routed only
        them): the CPU twin's handlers, and the AscendC kernel's through its tiling (ascendc-cpu)."""
        self.lib.hpmoe_cpu_rank_set_tokens(self.handle, begin, end)

    def close(self) -> None:
        if self.handle:
            self.lib.hpmoe_cpu_rank_close(self.handle)
            self.handle = None


def run(ranks: list[RankHandle], direction: str, dynamic: bool = False, log_path: str | None = None) -> None:
    """One launch of `direction` on these ranks together (all of them threads of this process). ascendc-cpu:
    `log_path` receives the stub call log of the launch (tests/ascend)."""
    handles = (ctypes.c_void_p * len(ranks))(*[r.handle for r in ranks])
    err = ctypes.create_string_buffer(ERR_LEN)
    if len({r.backend for r in ranks}) != 1:
        raise RuntimeFailure("ranks opened on different backends cannot launch together")
    L = ranks[0].lib
    if ranks[0].backend == "ascendc-cpu":
        if dynamic:
            raise RuntimeFailure("the ascendc-cpu backend runs the static worker loop only")
        failed = L.hpmoe_ascendc_run(handles, len(ranks), DIRECTIONS[direction],
                                     log_path.encode() if log_path else None, err, ERR_LEN)
    else:
        failed = L.hpmoe_cpu_run(handles, len(ranks), DIRECTIONS[direction], int(dynamic), err, ERR_LEN)
    if failed:
        raise RuntimeFailure(err.value.decode())


_VALIDATOR = None


def _validator() -> ctypes.CDLL:
    """The backend-neutral validator's C ABI, from the CPU twin's library whatever backend runs."""
    global _VALIDATOR
    if _VALIDATOR is None:
        path = library_path("cpu")
        if not path.exists():
            raise RuntimeFailure(f"SSC validator library not found at {path}: run ./build.sh setup")
        L = ctypes.CDLL(str(path))
        u32, pu32 = ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32)
        L.hpmoe_ssc_validate.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_uint64), u32, pu32,
                                         ctypes.c_char_p, ctypes.c_int]
        _VALIDATOR = L
    return _VALIDATOR


def validate_ssc(blobs: list[bytes]) -> tuple[str, bool]:
    """The C++ load-time validator (op_host/ssc_loader.h) over SSC files of one direction: ("", whole_group)
    when valid, else (one line, False). Every rank of a group given: the group checks run too."""
    files = (ctypes.c_char_p * len(blobs))(*blobs)
    sizes = (ctypes.c_uint64 * len(blobs))(*[len(b) for b in blobs])
    whole = ctypes.c_uint32(0)
    err = ctypes.create_string_buffer(ERR_LEN)
    if _validator().hpmoe_ssc_validate(files, sizes, len(blobs), ctypes.byref(whole), err, ERR_LEN):
        return err.value.decode(errors="replace"), False
    return "", bool(whole.value)
