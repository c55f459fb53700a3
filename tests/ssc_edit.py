"""Edit fields of a valid SSC and re-stamp its CRC, so a test reaches the checks behind the checksum."""
from __future__ import annotations

import zlib

import numpy as np

from hpmoe.ssc_format import HEADER_DTYPE, SECTION_DTYPES, Section, TaskType

CHECKSUM = HEADER_DTYPE.fields["checksum"][1]


def restamp(data: bytearray | bytes) -> bytes:
    out = bytearray(data)
    out[CHECKSUM:CHECKSUM + 4] = b"\0\0\0\0"
    out[CHECKSUM:CHECKSUM + 4] = (zlib.crc32(bytes(out)) & 0xFFFFFFFF).to_bytes(4, "little")
    return bytes(out)


def records(data: bytes, section: Section) -> tuple[np.ndarray, int]:
    """Writable copy of a section's records and the section's byte offset."""
    h = np.frombuffer(data, HEADER_DTYPE, count=1)[0]
    off, count = int(h["sections"][section]["offset"]), int(h["sections"][section]["count"])
    return np.frombuffer(data, SECTION_DTYPES[section], count=count, offset=off).copy(), off


def edit(data: bytes, section: Section, index: int, field: str, value: int, sub: str | None = None,
         pos: int | None = None) -> bytes:
    """Set records[index][field] (or [field][pos][sub] for refs, [field][pos] for arrays) and re-stamp."""
    recs, off = records(data, section)
    target = recs[index]
    if sub is not None:
        target[field][pos][sub] = value
    elif pos is not None:
        target[field][pos] = value
    else:
        target[field] = value
    out = bytearray(data)
    out[off:off + recs.nbytes] = recs.tobytes()
    return restamp(out)


def first_task(data: bytes, task_type: TaskType) -> int:
    tasks, _ = records(data, Section.TASKS)
    return int(np.nonzero(tasks["task_type"] == task_type)[0][0])
