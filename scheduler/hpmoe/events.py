"""Event counters derived from tensor regions.

For every region a task reads from a slot its graph writes, the producers are the tasks whose output regions
overlap it; the regions of one slot a task reads count together (one wait). Each distinct producer set on a
rank becomes one event counter on that rank (counters live where their consumers run); its threshold is the
size of the set, and every producer in the set triggers it, with put_mem_signal when the producer runs on
another rank. Many producers may trigger one counter; many consumers may wait on it.
"""
from __future__ import annotations

import bisect
import dataclasses
from collections import defaultdict

from .errors import ScheduleError
from .ssc_format import MAX_TRIGGERS, MAX_WAITS, Slot
from .tasks import Ref, Task


@dataclasses.dataclass
class Event:
    rank: int
    event_id: int
    threshold: int
    op_id: int           # first consumer's op, for diagnostics
    remote: bool         # some producer runs on another rank
    producers: tuple[int, ...]


class RegionIndex:
    """Output regions per (rank, slot), sorted by first row, for overlap queries."""

    def __init__(self, tasks: list[Task]):
        entries: dict[tuple[int, Slot], list[tuple[int, Ref, int]]] = defaultdict(list)
        for task in tasks:
            for ref in task.outputs:
                entries[(ref.rank, ref.slot)].append((ref.row_offset, ref, task.uid))
        self._starts: dict[tuple[int, Slot], list[int]] = {}
        self._items: dict[tuple[int, Slot], list[tuple[Ref, int]]] = {}
        self._max_rows: dict[tuple[int, Slot], int] = {}
        for key, items in entries.items():
            items.sort(key=lambda e: (e[0], e[2]))
            self._starts[key] = [e[0] for e in items]
            self._items[key] = [(e[1], e[2]) for e in items]
            self._max_rows[key] = max(e[1].rows for e in items)

        self._cache: dict[Ref, tuple[int, ...]] = {}
        self._interned: dict[tuple[int, ...], tuple[int, ...]] = {}

    def overlapping(self, ref: Ref) -> list[tuple[Ref, int]]:
        key = (ref.rank, ref.slot)
        starts = self._starts.get(key)
        if not starts:
            return []
        row0, row1, col0, col1 = ref.row_offset, ref.row_offset + ref.rows, ref.col_offset, ref.col_offset + ref.cols
        lo = bisect.bisect_left(starts, row0 - self._max_rows[key] + 1)
        hi = bisect.bisect_left(starts, row1)
        return [(out, uid) for out, uid in self._items[key][lo:hi]
                if out.row_offset + out.rows > row0 and out.col_offset < col1 and out.col_offset + out.cols > col0]

    def intern(self, uids: tuple[int, ...]) -> tuple[int, ...]:
        """One object per distinct sorted uid set, so callers can key on id() instead of hashing long tuples."""
        return self._interned.setdefault(uids, uids)

    def producers(self, ref: Ref) -> tuple[int, ...]:
        """Sorted uids of the tasks writing anything inside `ref` (memoised: many tiles read whole buffers)."""
        found = self._cache.get(ref)
        if found is None:
            found = self._cache[ref] = self.intern(tuple(sorted({uid for _, uid in self.overlapping(ref)})))
        return found


def assign_events(tasks: list[Task], internal_slots: set[Slot], ranks: list[int] | None = None
                  ) -> dict[int, list[Event]]:
    """Fill task.waits/task.triggers for consumers on `ranks` (default: all) and return their events."""
    index = RegionIndex(tasks)
    wanted = set(ranks) if ranks is not None else {t.rank for t in tasks}
    events: dict[int, list[Event]] = {r: [] for r in sorted(wanted)}
    by_set: dict[tuple[int, int], Event] = {}  # (rank, id of the interned producer set)
    for task in tasks:
        if task.rank not in wanted:
            continue
        by_slot: dict[Slot, tuple[int, ...]] = {}
        for ref in task.inputs:
            if ref.slot not in internal_slots:
                continue
            if ref.rank != task.rank:
                raise ScheduleError(f"{task.describe()} reads {ref.slot.name} on rank {ref.rank}: "
                                    f"tasks read only local memory")
            producers = index.producers(ref)
            if not producers:
                raise ScheduleError(f"{task.describe()} reads {ref.slot.name} rows "
                                    f"[{ref.row_offset}, {ref.row_end}) that no task writes")
            # Several regions of one slot (a split SwiGLU's gate and up columns of H) are one wait.
            seen = by_slot.get(ref.slot)
            by_slot[ref.slot] = producers if seen is None else index.intern(tuple(sorted({*seen, *producers})))
        sets: list[tuple[int, ...]] = []
        for producers in by_slot.values():
            if all(producers is not other for other in sets):
                sets.append(producers)
        if len(sets) > MAX_WAITS:
            raise ScheduleError(f"{task.describe()} needs {len(sets)} events; a task waits on at most {MAX_WAITS}")
        for producers in sets:
            key = (task.rank, id(producers))
            event = by_set.get(key)
            if event is None:
                rank_events = events[task.rank]
                remote = any(tasks[uid].rank != task.rank for uid in producers)
                event = Event(task.rank, len(rank_events), len(producers), task.op_id, remote, producers)
                rank_events.append(event)
                by_set[key] = event
                for uid in producers:
                    producer = tasks[uid]
                    producer.triggers.append((task.rank, event.event_id))
                    if len(producer.triggers) > MAX_TRIGGERS:
                        raise ScheduleError(f"{producer.describe()} feeds {len(producer.triggers)} events; "
                                            f"a task triggers at most {MAX_TRIGGERS}")
            task.waits.append(event.event_id)
    return events
