"""SSCs per shape bucket for the framework ops (hpmoe.mindspore, hpmoe.torch): compiled on first use, cached
in memory and in `ssc_dir`, files written by `hpmoe compile` picked up, mismatched files refused, capacity
grown geometrically on overflow. Framework-neutral: numpy and the compiler only.

A bucket is (T, C): C rows a rank can receive from each source (docs/design.md). Every rank of a group must
use the same bucket for a call; the caller agrees on the routing counts first (the max over the group of
rows one source sends one rank) and then asks `capacity_for(need)`, which is deterministic, so every rank
picks the same C.

Two kinds of `ssc_dir`:
- it holds `rank<r>.fwd.ssc` / `rank<r>.bwd.ssc` directly (what `hpmoe compile --all-ranks -o DIR` writes):
  the bucket is **pinned** to that file's C; routing beyond it is a RoutingError naming the C it needs;
- otherwise it is a cache: each compiled bucket goes to `DIR/bucket-T<T>-C<C>/`, read back next time.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import os
from pathlib import Path

from .. import ssc_io
from ..compiler import compile_schedules
from ..config import MoeConfig
from ..errors import RoutingError, SscFormatError

GROWTH = 1.25  # the reference's push mode: start at capacity factor 1.25, grow by 1.25 on overflow
MATCHED_FIELDS = ("ep", "tokens", "hidden", "inter", "experts_per_rank", "topk", "dtype")
log = logging.getLogger("hpmoe")


@dataclasses.dataclass(frozen=True)
class Bucket:
    cfg: MoeConfig                 # the config the SSCs were compiled for (recv_rows_per_src = C)
    fwd: bytes                     # this rank's forward SSC
    bwd: bytes                     # this rank's backward SSC
    counters: tuple[int, int]      # group-wide event counts (fwd, bwd): sizes the symmetric heap's counters
    source: str                    # "compiled", "cache <dir>" or "pinned <dir>"


def _check_match(cfg: MoeConfig, want: MoeConfig, rank: int, file_rank: int, direction: str,
                 file_direction: str, source: str) -> None:
    for name in MATCHED_FIELDS:
        if getattr(cfg, name) != getattr(want, name):
            raise SscFormatError(f"{source}: SSC compiled for {name}={getattr(cfg, name)}, this call needs "
                                 f"{name}={getattr(want, name)}")
    if file_rank != rank or file_direction != direction:
        raise SscFormatError(f"{source}: SSC is rank {file_rank} {file_direction}, expected rank {rank} {direction}")


def _read_group(folder: Path, want: MoeConfig, rank: int, capacity: int | None) -> Bucket:
    """Every rank's fwd/bwd files of one bucket in `folder` (the heap's counters need the group's maxima)."""
    counters = [0, 0]
    mine: dict[str, bytes] = {}
    cfg = None
    for r in range(want.ep):
        for i, d in enumerate(("fwd", "bwd")):
            path = folder / f"rank{r}.{d}.ssc"
            if not path.exists():
                raise SscFormatError(f"{folder} lacks {path.name}: compile the whole group "
                                     f"(hpmoe compile --all-ranks --direction both -o {folder})")
            data = path.read_bytes()
            s = ssc_io.from_bytes(data, str(path))
            _check_match(s.cfg, want, r, s.rank, d, s.direction_name, str(path))
            if capacity is not None and s.cfg.recv_rows_per_src != capacity:
                raise SscFormatError(f"{path}: SSC bucket C={s.cfg.recv_rows_per_src}, expected C={capacity}")
            if cfg is not None and s.cfg != cfg:
                raise SscFormatError(f"{path}: its config differs from the other files of {folder}")
            cfg = s.cfg
            counters[i] = max(counters[i], s.counters_needed)
            if r == rank:
                mine[d] = data
    return Bucket(cfg, mine["fwd"], mine["bwd"], (counters[0], counters[1]), f"{folder}")


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)  # ranks sharing a cache folder write identical bytes; readers never see a torn file


class SscCache:
    """Buckets of one (model shape, EP group, rank). `base` fixes everything but C; its recv_rows_per_src
    (from capacity_factor) is the first bucket."""

    def __init__(self, base: MoeConfig, rank: int, ssc_dir: str | os.PathLike | None = None):
        if not 0 <= rank < base.ep:
            raise SscFormatError(f"rank {rank} outside the EP group of {base.ep}")
        self.base, self.rank = base, rank
        self.dir = Path(ssc_dir) if ssc_dir is not None else None
        self.buckets: dict[int, Bucket] = {}
        self.pinned: Bucket | None = None
        if self.dir is not None and (self.dir / f"rank{rank}.fwd.ssc").exists():
            self.pinned = _read_group(self.dir, base, rank, None)
            self.pinned = dataclasses.replace(self.pinned, source=f"pinned {self.dir}")
            self.buckets[self.pinned.cfg.recv_rows_per_src] = self.pinned

    @property
    def limit(self) -> int:
        """Largest useful C: every token sends min(k, E_local) rows to one rank, rounded to tile_m."""
        return -(-self.base.max_rows_per_pair // self.base.tile_m) * self.base.tile_m

    def first_capacity(self) -> int:
        return self.pinned.cfg.recv_rows_per_src if self.pinned else self.base.recv_rows_per_src

    def capacity_for(self, need: int, current: int) -> int:
        """The bucket for a call whose largest (source, destination) row count is `need`, given the bucket in
        use. Grows by GROWTH (rounded up to tile_m) until it fits; never shrinks. Pinned: RoutingError."""
        if need <= current:
            return current
        if self.pinned is not None:
            want = max(self.base.tile_m, -(-need // self.base.tile_m) * self.base.tile_m)
            raise RoutingError(f"a rank sends {need} rows to one rank; the pinned SSCs in {self.dir} hold "
                               f"C={current}; compile with --recv-rows-per-src {want}")
        if need > self.limit:  # impossible for valid ids: one source sends at most T * min(k, E_local) rows
            raise RoutingError(f"a rank sends {need} rows to one rank, more than T*min(k, E_local)="
                               f"{self.base.max_rows_per_pair} (T={self.base.tokens})")
        cap = current
        while cap < need:
            cap = min(self.limit, -(-math.ceil(cap * GROWTH) // self.base.tile_m) * self.base.tile_m)
        if cap not in self.buckets:
            log.warning("hpmoe: routing needs %d rows from one source rank; growing the bucket C=%d -> %d "
                        "(T=%d, x%.2f steps)", need, current, cap, self.base.tokens, GROWTH)
        return cap

    def get(self, capacity: int) -> Bucket:
        """The bucket with C = capacity: memory, then the cache folder, then a compile (written back)."""
        if capacity in self.buckets:
            return self.buckets[capacity]
        cfg = self.base.replace(recv_rows_per_src=capacity)
        bucket = None
        folder = self.dir / f"bucket-T{cfg.tokens}-C{capacity}" if self.dir is not None else None
        if folder is not None and (folder / f"rank{self.rank}.fwd.ssc").exists():
            bucket = dataclasses.replace(_read_group(folder, cfg, self.rank, capacity), source=f"cache {folder}")
        if bucket is None:
            schedules = compile_schedules(cfg, ["fwd", "bwd"], list(range(cfg.ep)))
            data = {(s.rank, s.direction_name): ssc_io.to_bytes(s) for s in schedules}
            counters = tuple(max(s.counters_needed for s in schedules if s.direction_name == d) for d in ("fwd", "bwd"))
            if folder is not None:
                folder.mkdir(parents=True, exist_ok=True)
                for (r, d), b in data.items():
                    _write_atomic(folder / f"rank{r}.{d}.ssc", b)
            bucket = Bucket(cfg, data[(self.rank, "fwd")], data[(self.rank, "bwd")], counters, "compiled")
        self.buckets[capacity] = bucket
        return bucket
