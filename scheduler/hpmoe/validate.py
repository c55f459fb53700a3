"""Schedule validator: runs at the end of every compile and as `hpmoe verify`.

It reads only what an SSC holds (RankSchedule record arrays), so it checks exactly what the runtime will run:
1. structure: indices in range, every task in exactly one queue of its type, regions inside their tensors;
2. thresholds: each event's threshold equals the triggers that target it (group), or bounds them (one rank);
3. coverage: every region a task reads from a slot its direction writes is covered by producers that trigger
   one of its waited events, and every task writing into that region is one of them (no read before write);
4. writes: no two tasks write overlapping regions unless a dependency path orders them;
5. progress: dependency edges (task -> event -> task) plus per-queue order edges are acyclic across all ranks
   of the group, so no schedule can deadlock.
Each violation names rank, queue, worker, task and event.
"""
from __future__ import annotations

import bisect
import dataclasses
from collections import defaultdict, deque

import numpy as np

from .compiler import RankSchedule
from .errors import ScheduleError
from .ssc_format import NO_EVENT, NO_SLOT, REF_REMOTE, QueueType, Slot, TaskType

CTQ_TYPES = {TaskType.GMM, TaskType.GMM_TRANS_B, TaskType.GMM_WEIGHT_GRAD}


@dataclasses.dataclass(frozen=True)
class Region:
    rank: int
    slot: int
    row0: int
    row1: int
    col0: int
    col1: int

    def area_inside(self, other: "Region") -> int:
        rows = min(self.row1, other.row1) - max(self.row0, other.row0)
        cols = min(self.col1, other.col1) - max(self.col0, other.col0)
        return rows * cols if rows > 0 and cols > 0 else 0


class _Group:
    """Flattened view of the schedules: node ids for tasks, and where each task sits in its queue."""

    def __init__(self, schedules: list[RankSchedule]):
        self.schedules = {s.rank: s for s in schedules}
        self.base: dict[int, int] = {}
        total = 0
        for s in schedules:
            self.base[s.rank] = total
            total += len(s.tasks)
        self.num_tasks = total
        self.where: dict[int, tuple[str, int]] = {}
        for s in schedules:
            for qi, q in enumerate(s.queues):
                name = "CTQ" if q["queue_type"] == QueueType.CTQ else "VTQ"
                for task in s.queue_tasks(qi):
                    self.where[self.base[s.rank] + int(task)] = (name, int(q["worker"]))

    def name(self, gid: int) -> str:
        for rank in sorted(self.base, reverse=True):
            if gid >= self.base[rank]:
                local = gid - self.base[rank]
                t = self.schedules[rank].tasks[local]
                queue, worker = self.where.get(gid, ("no queue", -1))
                return (f"rank {rank} {queue} worker {worker} task {local} "
                        f"({TaskType(int(t['task_type'])).name} op {int(t['op_id'])} index {int(t['task_index'])})")
        return f"task {gid}"


def _refs(task: np.void, field: str, rank: int):
    for ref in task[field]:
        if int(ref["slot"]) == NO_SLOT:
            continue
        owner = int(ref["rank"]) if int(ref["flags"]) & REF_REMOTE else rank
        yield Region(owner, int(ref["slot"]), int(ref["row_offset"]), int(ref["row_offset"]) + int(ref["rows"]),
                     int(ref["col_offset"]), int(ref["col_offset"]) + int(ref["cols"]))


def _check_structure(s: RankSchedule, errors: list[str]) -> None:
    cfg = s.cfg
    shapes = {int(t["slot"]): (int(np.prod(t["dims"][:max(1, int(t["ndim"]) - 1)])), int(t["dims"][int(t["ndim"]) - 1]))
              for t in s.tensors}
    n_events, n_tasks = len(s.events), len(s.tasks)
    for i, t in enumerate(s.tasks):
        where = f"rank {s.rank} task {i}"
        try:
            ttype = TaskType(int(t["task_type"]))
        except ValueError:
            errors.append(f"{where}: unknown task_type {int(t['task_type'])}")
            continue
        expected_queue = QueueType.CTQ if ttype in CTQ_TYPES else QueueType.VTQ
        if int(t["queue_type"]) != expected_queue:
            errors.append(f"{where} ({ttype.name}): queue_type {int(t['queue_type'])}, expected {expected_queue.name}")
        for e in t["dependent_event"]:
            if int(e) != NO_EVENT and int(e) >= n_events:
                errors.append(f"{where} ({ttype.name}): waits on event {int(e)}, rank has {n_events}")
        for e, r in zip(t["trigger_event"], t["trigger_rank"]):
            if int(e) != NO_EVENT and int(r) >= cfg.ep:
                errors.append(f"{where} ({ttype.name}): triggers event {int(e)} on rank {int(r)} outside the group")
        if int(t["tiling_data_position"]) >= len(s.tilings):
            errors.append(f"{where}: tiling_data_position {int(t['tiling_data_position'])} out of range")
        for field in ("inputs", "outputs"):
            for reg in _refs(t, field, s.rank):
                shape = shapes.get(reg.slot)
                if shape is None:
                    errors.append(f"{where} ({ttype.name}): {field} slot {reg.slot} missing from the tensor table")
                elif reg.row1 > shape[0] or reg.col1 > shape[1] or reg.rank >= cfg.ep:
                    errors.append(f"{where} ({ttype.name}): {field} region rows [{reg.row0},{reg.row1}) cols "
                                  f"[{reg.col0},{reg.col1}) on rank {reg.rank} exceeds {Slot(reg.slot).name} {shape}")
    counts = np.zeros(n_tasks, np.int64)
    if len(s.queues) != cfg.num_aic + cfg.num_aiv:
        errors.append(f"rank {s.rank}: {len(s.queues)} queues for {cfg.num_aic} AIC + {cfg.num_aiv} AIV workers")
    for qi, q in enumerate(s.queues):
        first, count = int(q["first_entry"]), int(q["count"])
        if first + count > len(s.entries):
            errors.append(f"rank {s.rank} queue {qi}: entries [{first}, +{count}) outside {len(s.entries)}")
            continue
        for task in s.queue_tasks(qi):
            if int(task) >= n_tasks:
                errors.append(f"rank {s.rank} queue {qi}: entry {int(task)} is not a task")
                continue
            counts[int(task)] += 1
            if int(s.tasks[int(task)]["queue_type"]) != int(q["queue_type"]):
                errors.append(f"rank {s.rank} queue {qi}: task {int(task)} belongs to the other queue type")
    for i in np.nonzero(counts != 1)[0]:
        errors.append(f"rank {s.rank} task {int(i)}: appears in {int(counts[i])} queues, expected exactly 1")


class _Writers:
    """Output regions of the whole group per (rank, slot), for overlap queries."""

    def __init__(self, g: _Group):
        items = defaultdict(list)
        for rank, s in g.schedules.items():
            for i, t in enumerate(s.tasks):
                for reg in _refs(t, "outputs", rank):
                    items[(reg.rank, reg.slot)].append((reg.row0, reg, g.base[rank] + i))
        self.items, self.starts, self.max_rows = {}, {}, {}
        for key, rows in items.items():
            rows.sort(key=lambda e: (e[0], e[2]))
            self.items[key] = [(r, gid) for _, r, gid in rows]
            self.starts[key] = [e[0] for e in rows]
            self.max_rows[key] = max(r.row1 - r.row0 for _, r, _ in rows)

    def overlapping(self, reg: Region) -> list[tuple[Region, int]]:
        key = (reg.rank, reg.slot)
        if key not in self.items:
            return []
        lo = bisect.bisect_left(self.starts[key], reg.row0 - self.max_rows[key] + 1)
        hi = bisect.bisect_left(self.starts[key], reg.row1)
        return [(r, gid) for r, gid in self.items[key][lo:hi] if r.area_inside(reg) > 0]


def validate(schedules: list[RankSchedule], *, group: bool | None = None, max_errors: int = 20) -> list[str]:
    """All violations found (empty = valid). group=None: a group check when every rank of the EP is given."""
    if not schedules:
        return ["no schedules to validate"]
    cfg, direction = schedules[0].cfg, schedules[0].direction
    errors: list[str] = []
    for s in schedules:
        if s.cfg.ssc_fields() != cfg.ssc_fields() or s.direction != direction:
            errors.append(f"rank {s.rank}: config or direction differs from rank {schedules[0].rank}; "
                          f"a group must come from one compile")
        _check_structure(s, errors)
    ranks = sorted(s.rank for s in schedules)
    if len(set(ranks)) != len(ranks):
        errors.append(f"ranks given twice: {ranks}")
    if errors:
        return errors[:max_errors]
    is_group = ranks == list(range(cfg.ep)) if group is None else group
    g = _Group(schedules)

    # Triggers per (rank, event), and the producers behind each event.
    triggers: dict[tuple[int, int], list[int]] = defaultdict(list)
    for rank, s in g.schedules.items():
        for i, t in enumerate(s.tasks):
            for e, r in zip(t["trigger_event"], t["trigger_rank"]):
                if int(e) != NO_EVENT:
                    triggers[(int(r), int(e))].append(g.base[rank] + i)
    for rank, s in g.schedules.items():
        for e, ev in enumerate(s.events):
            n = len(triggers.get((rank, e), ()))
            local_only = not is_group
            if (n != int(ev["threshold"]) and not local_only) or (local_only and n > int(ev["threshold"])):
                errors.append(f"rank {rank} event {e}: threshold {int(ev['threshold'])} but {n} trigger(s)"
                              f"{' from this rank' if local_only else ''}")
    if is_group:
        for (rank, e), producers in triggers.items():
            if rank in g.schedules and e >= len(g.schedules[rank].events):
                errors.append(f"{g.name(producers[0])} triggers event {e} on rank {rank}, which has "
                              f"{len(g.schedules[rank].events)} events")

    # Coverage: only checkable when every writer is known (the whole group).
    if is_group:
        internal = {reg.slot for rank, s in g.schedules.items() for t in s.tasks for reg in _refs(t, "outputs", rank)}
        writers = _Writers(g)
        for rank, s in g.schedules.items():
            for i, t in enumerate(s.tasks):
                gid = g.base[rank] + i
                waited = set()
                for e in t["dependent_event"]:
                    if int(e) != NO_EVENT:
                        waited.update(triggers.get((rank, int(e)), ()))
                for reg in _refs(t, "inputs", rank):
                    if reg.slot not in internal:
                        continue
                    found = writers.overlapping(reg)
                    covered = sum(w.area_inside(reg) for w, _ in found)
                    area = (reg.row1 - reg.row0) * (reg.col1 - reg.col0)
                    if covered < area:
                        errors.append(f"{g.name(gid)}: reads {Slot(reg.slot).name} rows [{reg.row0},{reg.row1}) "
                                      f"cols [{reg.col0},{reg.col1}) of which {area - covered} elements no task writes")
                    for _, writer in found:
                        if writer not in waited:
                            events = [int(e) for e in t["dependent_event"] if int(e) != NO_EVENT]
                            errors.append(f"{g.name(gid)}: reads {Slot(reg.slot).name} written by {g.name(writer)} "
                                          f"without waiting for it (waits on events {events})")
                            break
                    if len(errors) >= max_errors:
                        return errors
        _check_writes(g, writers, triggers, errors)
    errors.extend(_check_acyclic(g, triggers, is_group))
    return errors[:max_errors]


def _edges(g: _Group, triggers: dict[tuple[int, int], list[int]], is_group: bool):
    """Successor lists over task nodes [0, n) and event nodes [n, ...)."""
    event_node: dict[tuple[int, int], int] = {}
    succ: list[list[int]] = [[] for _ in range(g.num_tasks)]

    def node(key: tuple[int, int]) -> int:
        if key not in event_node:
            event_node[key] = g.num_tasks + len(event_node)
            succ.append([])
        return event_node[key]

    for rank, s in g.schedules.items():
        for i, t in enumerate(s.tasks):
            gid = g.base[rank] + i
            for e in t["dependent_event"]:
                if int(e) != NO_EVENT:
                    succ[node((rank, int(e)))].append(gid)
            for e, r in zip(t["trigger_event"], t["trigger_rank"]):
                if int(e) != NO_EVENT and (int(r) in g.schedules):
                    succ[gid].append(node((int(r), int(e))))
        for qi in range(len(s.queues)):
            entries = s.queue_tasks(qi)
            for a, b in zip(entries[:-1], entries[1:]):
                succ[g.base[rank] + int(a)].append(g.base[rank] + int(b))
    return succ, {v: k for k, v in event_node.items()}


def _check_writes(g: _Group, writers: _Writers, triggers, errors: list[str]) -> None:
    pairs = []
    for key, items in writers.items.items():
        for i, (reg, gid) in enumerate(items):
            for other, ogid in items[i + 1:]:
                if other.row0 >= reg.row1:
                    break
                if reg.area_inside(other) > 0 and gid != ogid:
                    pairs.append((gid, ogid, key))
    if not pairs:
        return
    succ, _ = _edges(g, triggers, True)
    for a, b, key in pairs:
        if not (_reaches(succ, a, b) or _reaches(succ, b, a)):
            errors.append(f"{g.name(a)} and {g.name(b)} write overlapping {Slot(key[1]).name} on rank {key[0]} "
                          f"with nothing ordering them")


def _reaches(succ: list[list[int]], src: int, dst: int) -> bool:
    seen, todo = {src}, deque([src])
    while todo:
        for n in succ[todo.popleft()]:
            if n == dst:
                return True
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return False


def _check_acyclic(g: _Group, triggers, is_group: bool) -> list[str]:
    succ, event_of = _edges(g, triggers, is_group)
    indegree = [0] * len(succ)
    for outs in succ:
        for n in outs:
            indegree[n] += 1
    todo = deque(i for i, d in enumerate(indegree) if d == 0)
    done = 0
    while todo:
        n = todo.popleft()
        done += 1
        for m in succ[n]:
            indegree[m] -= 1
            if indegree[m] == 0:
                todo.append(m)
    if done == len(succ):
        return []
    # Walk inside the unresolved part until a node repeats: that loop is a cycle.
    stuck = {i for i, d in enumerate(indegree) if d > 0}
    path, index, node = [], {}, next(iter(sorted(stuck)))
    while node not in index:
        index[node] = len(path)
        path.append(node)
        node = next(m for m in succ[node] if m in stuck)
    cycle = path[index[node]:]
    names = [g.name(n) if n < g.num_tasks else f"event {event_of[n][1]} on rank {event_of[n][0]}" for n in cycle]
    return [f"deadlock: dependency and queue-order cycle of {len(cycle)} nodes: " + " -> ".join(names[:12])
            + (" -> ..." if len(names) > 12 else "")]


def check(schedules: list[RankSchedule], **kwargs) -> None:
    """Raise ScheduleError with the first violation (and how many more) if the schedules are invalid."""
    errors = validate(schedules, **kwargs)
    if errors:
        more = f" (+{len(errors) - 1} more; run hpmoe verify for all)" if len(errors) > 1 else ""
        raise ScheduleError(f"schedule invalid: {errors[0]}{more}")
