"""Python mirror of op_kernel/ssc_layout.h: enum values and numpy record dtypes.

The header is the definition; this module follows it. tests/test_layout_header.py compiles a C++ probe that
prints every size, offset and enum value of the header and compares them with this module, so a change on
one side without the other fails the tests.
"""
from __future__ import annotations

import enum

import numpy as np

MAGIC = 0x434D5348
VERSION_MAJOR = 1
VERSION_MINOR = 2

MAX_INPUTS = 4
MAX_OUTPUTS = 2
MAX_WAITS = 2
MAX_TRIGGERS = 2
MAX_TENSOR_DIMS = 4
TENSOR_NAME_BYTES = 24
NO_EVENT = 0xFFFFFFFF
NO_SLOT = 0xFFFF
COUNTER_STRIDE_BYTES = 64
FUSED_SWIGLU_GROUP = 128  # kConfigFusedSwiglu: H interleaves gate and up in groups of this many columns


class Direction(enum.IntEnum):
    FORWARD = 0
    BACKWARD = 1


class QueueType(enum.IntEnum):
    CTQ = 0
    VTQ = 1
    POOL = 2  # claim_pool: queues after the workers', claimed at run time (MoeConfig.pool_claimers)


class DType(enum.IntEnum):
    FP32 = 0
    FP16 = 1
    BF16 = 2
    INT32 = 3


DTYPE_BYTES = {DType.FP32: 4, DType.FP16: 2, DType.BF16: 2, DType.INT32: 4}


class TaskType(enum.IntEnum):
    ENTRY_SIGNAL = 0
    COUNT_PUT = 1
    DISPATCH_PUT = 2
    GMM = 3
    SWIGLU = 4
    COMBINE_PUT = 5
    COMBINE_REDUCE = 6
    BWD_DISPATCH_PUT = 7
    GMM_TRANS_B = 8
    GMM_WEIGHT_GRAD = 9
    SWIGLU_GRAD = 10
    BWD_COMBINE_REDUCE = 11
    TOPK_WEIGHT_GRAD = 12
    ADD = 13
    GMM_SWIGLU = 14  # fused_swiglu: GMM1 with SwiGLU in its epilogue
    GMM_SWIGLU_GRAD = 15  # fused_swiglu: the activation gradient's GMM with SwiGLU's gradient in its epilogue


class Slot(enum.IntEnum):
    X = 0
    TOPK_IDS = 1
    TOPK_WEIGHTS = 2
    W1 = 3
    W2 = 4
    SEND_ROWS = 5
    SEND_COUNTS = 6
    RECV_COUNTS = 7
    PEER_READY = 8
    RECV_X = 9
    H = 10
    A = 11
    Y_EXPERT = 12
    RET_Y = 13
    Y = 14
    DY = 15
    RECV_DY = 16
    DA = 17
    DH = 18
    DX_EXPERT = 19
    RET_DX = 20
    DX = 21
    DW1 = 22
    DW2 = 23
    DTOPK_WEIGHTS = 24
    TOKEN_ROWS = 25


class Role(enum.IntEnum):
    INPUT = 0
    WEIGHT = 1
    ROUTING = 2
    WORKSPACE = 3
    SAVED = 4
    OUTPUT = 5


TENSOR_SYMMETRIC = 1 << 0
REF_REMOTE = 1 << 0
REF_ROWS_DYNAMIC = 1 << 1
REF_GATHER = 1 << 2
EVENT_REMOTE_TRIGGERED = 1 << 0
CONFIG_RATR = 1 << 0
CONFIG_INTERLEAVE = 1 << 1
CONFIG_MIXED_QUEUES = 1 << 2
CONFIG_ROW_PIPELINES = 1 << 3
CONFIG_CLAIM_POOL = 1 << 4
CONFIG_WEIGHTS_TRANSPOSED = 1 << 5
CONFIG_FUSED_SWIGLU = 1 << 6
CONFIG_EXPERT_ALIGNED = 1 << 7  # each local expert's rows start on a tile_m boundary of its slot


class Section(enum.IntEnum):
    TENSORS = 0
    TASKS = 1
    EVENTS = 2
    QUEUES = 3
    QUEUE_ENTRIES = 4
    TILINGS = 5


SECTION_COUNT = len(Section)

CONFIG_FIELDS = (
    "ep", "tokens", "hidden", "inter", "experts_per_rank", "topk", "dtype", "tile_m",
    "recv_rows_per_src", "wgrad_tile", "token_tile", "num_aic", "num_aiv", "flags",
)

U32 = "<u4"
CONFIG_DTYPE = np.dtype([(name, U32) for name in CONFIG_FIELDS] + [("reserved", U32, (2,))])
SECTION_DTYPE = np.dtype([("offset", U32), ("count", U32), ("record_bytes", U32), ("reserved", U32)])
HEADER_DTYPE = np.dtype([
    ("magic", U32), ("version_major", "<u2"), ("version_minor", "<u2"), ("header_bytes", U32),
    ("file_bytes", U32), ("checksum", U32), ("direction", U32), ("rank", U32), ("num_workers", U32),
    ("config", CONFIG_DTYPE), ("sections", SECTION_DTYPE, (SECTION_COUNT,)),
])
TENSOR_DTYPE = np.dtype([
    ("slot", U32), ("role", U32), ("dtype", U32), ("flags", U32), ("ndim", U32),
    ("dims", U32, (MAX_TENSOR_DIMS,)), ("reserved", U32), ("bytes", "<u8"), ("name", f"S{TENSOR_NAME_BYTES}"),
])
REF_DTYPE = np.dtype([
    ("slot", "<u2"), ("flags", "<u2"), ("rank", U32), ("row_offset", U32), ("rows", U32),
    ("col_offset", U32), ("cols", U32),
])
TASK_DTYPE = np.dtype([
    ("task_type", U32), ("queue_type", U32), ("dependent_event", U32, (MAX_WAITS,)),
    ("trigger_event", U32, (MAX_TRIGGERS,)), ("trigger_rank", U32, (MAX_TRIGGERS,)),
    ("task_index", U32), ("task_split_num", U32), ("task_split_value", U32), ("tiling_data_position", U32),
    ("op_id", U32), ("peer", U32), ("expert", U32), ("reserved", U32),
    ("inputs", REF_DTYPE, (MAX_INPUTS,)), ("outputs", REF_DTYPE, (MAX_OUTPUTS,)),
])
EVENT_DTYPE = np.dtype([("threshold", U32), ("flags", U32), ("op_id", U32), ("reserved", U32)])
QUEUE_DTYPE = np.dtype([("queue_type", U32), ("worker", U32), ("first_entry", U32), ("count", U32)])
TILING_DTYPE = np.dtype([
    ("op_id", U32), ("task_type", U32), ("m", U32), ("n", U32), ("k", U32), ("experts", U32),
    ("reserved", U32, (2,)),
])

SECTION_DTYPES = {
    Section.TENSORS: TENSOR_DTYPE,
    Section.TASKS: TASK_DTYPE,
    Section.EVENTS: EVENT_DTYPE,
    Section.QUEUES: QUEUE_DTYPE,
    Section.QUEUE_ENTRIES: np.dtype(U32),
    Section.TILINGS: TILING_DTYPE,
}

# Sizes the header static_asserts; checked here at import so a mismatch fails loudly and early.
assert CONFIG_DTYPE.itemsize == 64
assert HEADER_DTYPE.itemsize == 192
assert TENSOR_DTYPE.itemsize == 72
assert REF_DTYPE.itemsize == 24
assert TASK_DTYPE.itemsize == 208
assert EVENT_DTYPE.itemsize == 16 and QUEUE_DTYPE.itemsize == 16 and TILING_DTYPE.itemsize == 32
