"""Write and read SSC files (layout: op_kernel/ssc_layout.h)."""
from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

from .compiler import RankSchedule
from .config import config_from_ssc_fields
from .errors import ConfigError, SscFormatError
from .ssc_format import (CONFIG_FIELDS, HEADER_DTYPE, MAGIC, MAX_TENSOR_DIMS, NO_SLOT, SECTION_COUNT,
                         SECTION_DTYPES, VERSION_MAJOR, VERSION_MINOR, Direction, DType, QueueType, Section, Slot,
                         TaskType)

ALIGN = 16
CHECKSUM_OFFSET = HEADER_DTYPE.fields["checksum"][1]


def _sections(s: RankSchedule) -> dict[Section, np.ndarray]:
    return {Section.TENSORS: s.tensors, Section.TASKS: s.tasks, Section.EVENTS: s.events,
            Section.QUEUES: s.queues, Section.QUEUE_ENTRIES: s.entries, Section.TILINGS: s.tilings}


def checksum(data: bytes | bytearray) -> int:
    """CRC-32 of the file with the checksum field taken as zero."""
    zeroed = bytes(data[:CHECKSUM_OFFSET]) + b"\0\0\0\0" + bytes(data[CHECKSUM_OFFSET + 4:])
    return zlib.crc32(zeroed) & 0xFFFFFFFF


def to_bytes(s: RankSchedule) -> bytes:
    header = np.zeros(1, HEADER_DTYPE)
    body = bytearray()
    offset = HEADER_DTYPE.itemsize
    for sid, array in _sections(s).items():
        pad = (-offset) % ALIGN
        body += b"\0" * pad
        offset += pad
        header[0]["sections"][sid] = (offset, len(array), SECTION_DTYPES[sid].itemsize, 0)
        raw = np.ascontiguousarray(array, SECTION_DTYPES[sid]).tobytes()
        body += raw
        offset += len(raw)
    h = header[0]
    h["magic"], h["version_major"], h["version_minor"] = MAGIC, VERSION_MAJOR, VERSION_MINOR
    h["header_bytes"], h["file_bytes"] = HEADER_DTYPE.itemsize, offset
    h["direction"], h["rank"] = s.direction, s.rank
    h["num_workers"] = s.cfg.num_aic + s.cfg.num_aiv
    for name, value in s.cfg.ssc_fields().items():
        h["config"][name] = value
    data = bytearray(header.tobytes() + bytes(body))
    data[CHECKSUM_OFFSET:CHECKSUM_OFFSET + 4] = checksum(data).to_bytes(4, "little")
    return bytes(data)


def write(s: RankSchedule, path: str | Path) -> int:
    data = to_bytes(s)
    Path(path).write_bytes(data)
    return len(data)


def from_bytes(data: bytes, source: str = "<bytes>") -> RankSchedule:
    """Parse and check an SSC; every problem raises SscFormatError naming the file and the field."""
    if len(data) < HEADER_DTYPE.itemsize:
        raise SscFormatError(f"{source}: truncated: {len(data)} bytes, the header alone needs {HEADER_DTYPE.itemsize}")
    h = np.frombuffer(data, HEADER_DTYPE, count=1)[0]
    if int(h["magic"]) != MAGIC:
        raise SscFormatError(f"{source}: not an SSC file (magic 0x{int(h['magic']):08x})")
    if int(h["version_major"]) != VERSION_MAJOR:
        raise SscFormatError(f"{source}: SSC version {int(h['version_major'])}.{int(h['version_minor'])}, "
                             f"this build reads {VERSION_MAJOR}.x")
    if int(h["header_bytes"]) != HEADER_DTYPE.itemsize:
        raise SscFormatError(f"{source}: header_bytes {int(h['header_bytes'])} != {HEADER_DTYPE.itemsize}")
    if int(h["file_bytes"]) != len(data):
        raise SscFormatError(f"{source}: truncated or padded: header says {int(h['file_bytes'])} bytes, "
                             f"file has {len(data)}")
    if checksum(data) != int(h["checksum"]):
        raise SscFormatError(f"{source}: checksum mismatch (corrupted file)")
    if int(h["direction"]) not in (0, 1):
        raise SscFormatError(f"{source}: direction {int(h['direction'])} is neither fwd (0) nor bwd (1)")
    try:
        cfg = config_from_ssc_fields({n: int(h["config"][n]) for n in CONFIG_FIELDS})
    except (ConfigError, ValueError) as exc:
        raise SscFormatError(f"{source}: invalid config record: {exc}") from None
    if int(h["rank"]) >= cfg.ep:
        raise SscFormatError(f"{source}: rank {int(h['rank'])} outside the EP group of {cfg.ep}")
    arrays = {}
    for sid in Section:
        sec = h["sections"][sid]
        off, count, rec = int(sec["offset"]), int(sec["count"]), int(sec["record_bytes"])
        dtype = SECTION_DTYPES[sid]
        if rec != dtype.itemsize:
            raise SscFormatError(f"{source}: section {sid.name} records are {rec} bytes, expected {dtype.itemsize}")
        if off < HEADER_DTYPE.itemsize or off + count * rec > len(data):
            raise SscFormatError(f"{source}: section {sid.name} [{off}, +{count * rec}) lies outside the file")
        arrays[sid] = np.frombuffer(data, dtype, count=count, offset=off).copy()
    _check_enums(arrays, source)
    return RankSchedule(cfg, int(h["rank"]), Direction(int(h["direction"])), arrays[Section.TENSORS],
                        arrays[Section.TASKS], arrays[Section.EVENTS], arrays[Section.QUEUES],
                        arrays[Section.QUEUE_ENTRIES], arrays[Section.TILINGS])


def _check_enums(arrays: dict[Section, np.ndarray], source: str) -> None:
    """Enum and count fields every reader of the records relies on (names, dims, queue slices): a value out of
    range is one SscFormatError naming record, field and value. The C++ loader checks everything else."""
    def first_bad(mask: np.ndarray, record: str, field: str, values: np.ndarray) -> None:
        bad = np.nonzero(mask)[0]
        if len(bad):
            i = int(bad[0])
            raise SscFormatError(f"{source}: {record} {i} field {field}: {int(np.ravel(values[i])[0])} out of range")

    t = arrays[Section.TENSORS]
    first_bad(t["slot"] >= len(Slot), "tensor", "slot", t["slot"])
    first_bad((t["ndim"] == 0) | (t["ndim"] > MAX_TENSOR_DIMS), "tensor", "ndim", t["ndim"])
    first_bad(t["dtype"] >= len(DType), "tensor", "dtype", t["dtype"])
    tasks = arrays[Section.TASKS]
    first_bad(tasks["task_type"] >= len(TaskType), "task", "task_type", tasks["task_type"])
    first_bad(tasks["queue_type"] >= len(QueueType), "task", "queue_type", tasks["queue_type"])
    for field in ("inputs", "outputs"):
        slots = tasks[field]["slot"]
        bad = (slots != NO_SLOT) & (slots >= len(Slot))
        first_bad(bad.any(axis=1), "task", f"{field}.slot", np.where(bad, slots, 0).max(axis=1, initial=0))
    q = arrays[Section.QUEUES]
    first_bad(q["queue_type"] >= len(QueueType), "queue", "queue_type", q["queue_type"])
    end = q["first_entry"].astype(np.int64) + q["count"]
    first_bad(end > len(arrays[Section.QUEUE_ENTRIES]), "queue", "count", q["count"])
    first_bad(arrays[Section.TILINGS]["task_type"] >= len(TaskType), "tiling", "task_type",
              arrays[Section.TILINGS]["task_type"])


def read(path: str | Path) -> RankSchedule:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise SscFormatError(f"cannot read {path}: {exc.strerror}") from None
    return from_bytes(data, str(path))


assert SECTION_COUNT == len(Section)
