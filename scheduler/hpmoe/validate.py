"""Schedule validator: runs at the end of every compile and as `hpmoe verify`.

It reads only what an SSC holds (RankSchedule record arrays), so it checks exactly what the runtime will run:
1. structure: indices in range, every task in exactly one queue of its type, regions inside their tensors;
2. thresholds: never 0 or 0xFFFFFFFF; each equals the triggers that target it (group), or, on some ranks' files,
   the given triggers exactly (locally triggered events) or plus at most the puts other ranks can send;
3. coverage: every region a task reads from a slot its direction writes is covered by producers that trigger
   one of its waited events, and every task writing into that region is one of them (no read before write);
4. writes: no two tasks write overlapping regions unless a dependency path orders them;
5. progress: dependency edges (task -> event -> task) plus per-queue order edges are acyclic across all ranks
   of the group, so no schedule can deadlock.
Each violation names rank, queue, worker, task and event. Records are turned into Python tuples once
(`tolist`), since element-wise numpy access costs about a microsecond per field.
"""
from __future__ import annotations

import bisect
from collections import defaultdict, deque
from typing import NamedTuple

import numpy as np

from .compiler import RankSchedule
from .errors import ScheduleError
from .ssc_format import EVENT_REMOTE_TRIGGERED, NO_EVENT, NO_SLOT, REF_REMOTE, QueueType, Slot, TaskType

CTQ_TYPES = {TaskType.GMM, TaskType.GMM_TRANS_B, TaskType.GMM_WEIGHT_GRAD, TaskType.GMM_SWIGLU,
             TaskType.GMM_SWIGLU_GRAD}


class Region(NamedTuple):
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


class _Task(NamedTuple):
    gid: int
    rank: int
    local: int
    task_type: int
    op_id: int
    task_index: int
    waits: tuple[int, ...]
    triggers: tuple[tuple[int, int], ...]  # (rank, event)
    inputs: tuple[Region, ...]
    outputs: tuple[Region, ...]


def _regions(refs, rank: int) -> tuple[Region, ...]:
    # ref tuple order follows REF_DTYPE: slot, flags, rank, row_offset, rows, col_offset, cols
    return tuple(Region(r[2] if r[1] & REF_REMOTE else rank, r[0], r[3], r[3] + r[4], r[5], r[5] + r[6])
                 for r in refs if r[0] != NO_SLOT)


class _Group:
    """Flattened view of the schedules: one _Task per task, and where each task sits in its queue."""

    def __init__(self, schedules: list[RankSchedule], with_regions: bool):
        self.schedules = {s.rank: s for s in schedules}
        self.tasks: list[_Task] = []
        self.base: dict[int, int] = {}
        self.where: dict[int, tuple[str, int]] = {}
        for s in schedules:
            base = self.base[s.rank] = len(self.tasks)
            # Sub-array fields come back as arrays from a structured tolist(): list each field separately.
            t = s.tasks
            columns = zip(t["task_type"].tolist(), t["op_id"].tolist(), t["task_index"].tolist(),
                          t["dependent_event"].tolist(), t["trigger_event"].tolist(), t["trigger_rank"].tolist(),
                          t["inputs"].tolist() if with_regions else [()] * len(t),
                          t["outputs"].tolist() if with_regions else [()] * len(t))
            for i, (ttype, op, index, waits, trig_events, trig_ranks, inputs, outputs) in enumerate(columns):
                self.tasks.append(_Task(base + i, s.rank, i, ttype, op, index,
                                        tuple(e for e in waits if e != NO_EVENT),
                                        tuple((r, e) for e, r in zip(trig_events, trig_ranks) if e != NO_EVENT),
                                        _regions(inputs, s.rank), _regions(outputs, s.rank)))

    def _locate(self) -> None:
        """Queue and worker of every task; only needed to name tasks in a message."""
        for rank, s in self.schedules.items():
            for qi, q in enumerate(s.queues.tolist()):
                name = QueueType(q[0]).name if q[0] in set(QueueType) else f"queue type {q[0]}"
                for task in s.queue_tasks(qi).tolist():
                    self.where[self.base[rank] + task] = (name, q[1])

    def name(self, gid: int) -> str:
        if not self.where:
            self._locate()
        t = self.tasks[gid]
        queue, worker = self.where.get(gid, ("no queue", -1))
        return f"rank {t.rank} {queue} worker {worker} task {t.local} ({TaskType(t.task_type).name} op {t.op_id} index {t.task_index})"


def _check_structure(s: RankSchedule, errors: list[str]) -> None:
    """Vectorised range checks; reports the first offending task of each kind."""
    cfg, tasks, n_events, n_tasks = s.cfg, s.tasks, len(s.events), len(s.tasks)
    where = f"rank {s.rank} task"

    def report(mask: np.ndarray, text) -> None:
        bad = np.nonzero(mask)[0]
        if len(bad):
            errors.append(f"{where} {int(bad[0])}: {text(int(bad[0]))}" + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""))

    types = tasks["task_type"].astype(np.int64)
    report(types >= len(TaskType), lambda i: f"unknown task_type {int(types[i])}")
    known = types < len(TaskType)
    cube = np.isin(types, [int(t) for t in CTQ_TYPES])
    report(known & (tasks["queue_type"] != np.where(cube, QueueType.CTQ, QueueType.VTQ)),
           lambda i: f"({TaskType(int(types[i])).name}): queue_type {int(tasks['queue_type'][i])} is the wrong queue")
    waits = tasks["dependent_event"]
    report(((waits != NO_EVENT) & (waits >= n_events)).any(axis=1),
           lambda i: f"waits on event {int(waits[i].max())}, rank has {n_events}")
    report(((tasks["trigger_event"] != NO_EVENT) & (tasks["trigger_rank"] >= cfg.ep)).any(axis=1),
           lambda i: f"triggers a rank outside the EP group of {cfg.ep}")
    report(tasks["tiling_data_position"] >= len(s.tilings),
           lambda i: f"tiling_data_position {int(tasks['tiling_data_position'][i])} out of range")
    rows_of, cols_of = np.zeros(65536, np.int64), np.zeros(65536, np.int64)
    present = np.zeros(65536, bool)
    for slot, ndim, dims in zip(s.tensors["slot"].tolist(), s.tensors["ndim"].tolist(), s.tensors["dims"].tolist()):
        rows_of[slot] = int(np.prod(dims[:max(1, ndim - 1)]))
        cols_of[slot] = dims[ndim - 1]
        present[slot] = True
    for field in ("inputs", "outputs"):
        refs = tasks[field]
        used = refs["slot"] != NO_SLOT
        slot = refs["slot"].astype(np.int64)
        bad_slot = used & ~present[slot]
        report(bad_slot.any(axis=1), lambda i: f"{field} slot missing from the tensor table")
        over = used & ((refs["row_offset"].astype(np.int64) + refs["rows"] > rows_of[slot]) |
                       (refs["col_offset"].astype(np.int64) + refs["cols"] > cols_of[slot]) |
                       (refs["rank"] >= cfg.ep))
        report(over.any(axis=1), lambda i: f"{field} region exceeds its tensor")
    workers = cfg.num_aic + cfg.num_aiv
    if len(s.queues) < workers if cfg.claim_pool else len(s.queues) != workers:
        errors.append(f"rank {s.rank}: {len(s.queues)} queues for {cfg.num_aic} AIC + {cfg.num_aiv} AIV workers"
                      + (" + pool queues" if cfg.claim_pool else ""))
    counts = np.zeros(n_tasks, np.int64)
    for qi, q in enumerate(s.queues.tolist()):
        first, count = q[2], q[3]
        if first + count > len(s.entries):
            errors.append(f"rank {s.rank} queue {qi}: entries [{first}, +{count}) outside {len(s.entries)}")
            continue
        entries = s.queue_tasks(qi).astype(np.int64)
        if (entries >= n_tasks).any():
            errors.append(f"rank {s.rank} queue {qi}: entry {int(entries.max())} is not a task")
            continue
        np.add.at(counts, entries, 1)
        types_here = tasks["queue_type"][entries]
        expected = QueueType.CTQ if qi < cfg.num_aic else QueueType.VTQ if qi < cfg.num_aic + cfg.num_aiv \
            else QueueType.POOL
        if q[0] != expected:
            errors.append(f"rank {s.rank} queue {qi}: queue_type {q[0]}, expected {expected.name}")
            continue
        if q[0] == QueueType.POOL:  # run by a cube-queue worker: what it may hold, a CTQ may hold
            wrong = np.nonzero((types_here != QueueType.CTQ) & ~((types_here == QueueType.VTQ) & cfg.mixed_queues))[0]
            if len(wrong):
                errors.append(f"rank {s.rank} pool queue {qi}: task {int(entries[wrong[0]])} is a vector task; "
                              f"its claimers are cube-queue workers (compile with mixed queues)")
            continue
        # Mixed queues let cube workers run vector tasks too, never the reverse.
        shared = (q[0] == QueueType.CTQ) & (types_here == QueueType.VTQ) & cfg.mixed_queues
        wrong = np.nonzero((types_here != q[0]) & ~shared)[0]
        if len(wrong):
            errors.append(f"rank {s.rank} queue {qi}: task {int(entries[wrong[0]])} belongs to the other queue type")
    for i in np.nonzero(counts != 1)[0][:5]:
        errors.append(f"rank {s.rank} task {int(i)}: appears in {int(counts[i])} queues, expected exactly 1")


class _Writers:
    """Output regions of the whole group per (rank, slot), for overlap queries."""

    def __init__(self, tasks: list[_Task]):
        items = defaultdict(list)
        for t in tasks:
            for reg in t.outputs:
                items[(reg.rank, reg.slot)].append((reg.row0, t.gid, reg))
        self.items, self.starts, self.max_rows = {}, {}, {}
        for key, rows in items.items():
            rows.sort()
            self.items[key] = [(r, gid) for _, gid, r in rows]
            self.starts[key] = [e[0] for e in rows]
            self.max_rows[key] = max(r.row1 - r.row0 for _, _, r in rows)
        self._cache: dict[Region, list[tuple[Region, int]]] = {}

    def overlapping(self, reg: Region) -> list[tuple[Region, int]]:
        found = self._cache.get(reg)
        if found is None:
            key = (reg.rank, reg.slot)
            found = []
            if key in self.items:
                lo = bisect.bisect_left(self.starts[key], reg.row0 - self.max_rows[key] + 1)
                hi = bisect.bisect_left(self.starts[key], reg.row1)
                found = [(r, gid) for r, gid in self.items[key][lo:hi] if r.area_inside(reg) > 0]
            self._cache[reg] = found
        return found


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
    g = _Group(schedules, with_regions=is_group)  # regions are only needed for group coverage checks

    triggers: dict[tuple[int, int], list[int]] = defaultdict(list)
    for t in g.tasks:
        for key in t.triggers:
            triggers[key].append(t.gid)
    # A remote-triggered event gets at most one put per tile_m-row chunk of a C-row slot from each other rank.
    remote_bound = (cfg.ep - 1) * (cfg.recv_rows_per_src // cfg.tile_m)
    for rank, s in g.schedules.items():
        for e, (threshold, flags) in enumerate(zip(s.events["threshold"].tolist(), s.events["flags"].tolist())):
            n = len(triggers.get((rank, e), ()))
            if threshold in (0, NO_EVENT):
                errors.append(f"rank {rank} event {e}: threshold {threshold} (a wait would pass at once or never)")
            elif is_group and n != threshold:
                errors.append(f"rank {rank} event {e}: threshold {threshold} but {n} trigger(s)")
            elif not is_group and not (flags & EVENT_REMOTE_TRIGGERED) and n != threshold:
                errors.append(f"rank {rank} event {e}: threshold {threshold} but {n} trigger(s), none remote")
            elif not is_group and not n <= threshold <= n + remote_bound:
                errors.append(f"rank {rank} event {e}: threshold {threshold}, {n} trigger(s) from the given files "
                              f"plus at most {remote_bound} from other ranks")
    if is_group:
        for (rank, e), producers in triggers.items():
            if rank in g.schedules and e >= len(g.schedules[rank].events):
                errors.append(f"{g.name(producers[0])} triggers event {e} on rank {rank}, which has "
                              f"{len(g.schedules[rank].events)} events")
        writers = _Writers(g.tasks)
        _check_coverage(g, writers, triggers, errors, max_errors)
        if len(errors) < max_errors:
            _check_writes(g, writers, triggers, errors)
    if len(errors) < max_errors:
        errors.extend(_check_acyclic(g, triggers))
    return errors[:max_errors]


def _check_coverage(g: _Group, writers: _Writers, triggers, errors: list[str], max_errors: int) -> None:
    internal = {reg.slot for t in g.tasks for reg in t.outputs}
    waited_sets: dict[tuple[int, tuple[int, ...]], frozenset[int]] = {}
    uncovered: dict[Region, int] = {}          # region -> elements no task writes (shared by many readers)
    unwaited: dict[tuple[Region, int], int] = {}  # (region, id of waited set) -> first writer not waited on
    for t in g.tasks:
        key = (t.rank, t.waits)
        waited = waited_sets.get(key)
        if waited is None:
            waited = waited_sets[key] = frozenset(p for e in t.waits for p in triggers.get((t.rank, e), ()))
        for reg in t.inputs:
            if reg.slot not in internal:
                continue
            found = writers.overlapping(reg)
            missing = uncovered.get(reg)
            if missing is None:
                area = (reg.row1 - reg.row0) * (reg.col1 - reg.col0)
                missing = uncovered[reg] = area - sum(w.area_inside(reg) for w, _ in found)
            if missing > 0:
                errors.append(f"{g.name(t.gid)}: reads {Slot(reg.slot).name} rows [{reg.row0},{reg.row1}) "
                              f"cols [{reg.col0},{reg.col1}) of which {missing} elements no task writes")
            key2 = (reg, id(waited))
            writer = unwaited.get(key2)
            if writer is None:
                writer = unwaited[key2] = next((w for _, w in found if w not in waited), -1)
            if writer >= 0:
                errors.append(f"{g.name(t.gid)}: reads {Slot(reg.slot).name} written by {g.name(writer)} "
                              f"without waiting for it (waits on events {list(t.waits)})")
            if len(errors) >= max_errors:
                return


def _edges(g: _Group, triggers) -> tuple[list[list[int]], dict[int, tuple[int, int]]]:
    """Successor lists over task nodes [0, n) and event nodes [n, ...)."""
    n = len(g.tasks)
    event_node: dict[tuple[int, int], int] = {}
    succ: list[list[int]] = [[] for _ in range(n)]

    def node(key: tuple[int, int]) -> int:
        found = event_node.get(key)
        if found is None:
            found = event_node[key] = n + len(event_node)
            succ.append([])
        return found

    for t in g.tasks:
        for e in t.waits:
            succ[node((t.rank, e))].append(t.gid)
        for key in t.triggers:
            if key[0] in g.schedules:
                succ[t.gid].append(node(key))
    for rank, s in g.schedules.items():
        base = g.base[rank]
        pool: list[int] = []
        for qi in range(len(s.queues)):
            entries = s.queue_tasks(qi).tolist()
            if int(s.queues[qi]["queue_type"]) == QueueType.POOL:
                pool.extend(entries)
                continue
            for a, b in zip(entries[:-1], entries[1:]):
                succ[base + a].append(base + b)
        # Claims in pool order by any claimer reduce to this: the pool units as one queue, run after every
        # claimer's own queue. (If one worker could run that queue, the lowest unfinished claimed unit can
        # always proceed: its pool inputs come from earlier units, the rest from queues that do not wait on it.)
        for a, b in zip(pool[:-1], pool[1:]):
            succ[base + a].append(base + b)
        if pool:
            for qi in range(min(s.cfg.pool_claimers, len(s.queues))):
                own = s.queue_tasks(qi).tolist()
                if own:
                    succ[base + own[-1]].append(base + pool[0])
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
    succ, _ = _edges(g, triggers)
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


def _check_acyclic(g: _Group, triggers) -> list[str]:
    succ, event_of = _edges(g, triggers)
    indegree = [0] * len(succ)
    for outs in succ:
        for n in outs:
            indegree[n] += 1
    todo = [i for i, d in enumerate(indegree) if d == 0]
    done = 0
    while todo:
        n = todo.pop()
        done += 1
        for m in succ[n]:
            indegree[m] -= 1
            if indegree[m] == 0:
                todo.append(m)
    if done == len(succ):
        return []
    # The unresolved part, less what a cycle only blocks (pruned sinks first, so every node left has a
    # successor left); walk it until a node repeats: that loop is a cycle.
    stuck = {i for i, d in enumerate(indegree) if d > 0}
    pred: dict[int, list[int]] = {}
    outdegree = {n: 0 for n in stuck}
    for n in stuck:
        for m in succ[n]:
            if m in stuck:
                pred.setdefault(m, []).append(n)
                outdegree[n] += 1
    sinks = [n for n, d in outdegree.items() if d == 0]
    while sinks:
        n = sinks.pop()
        stuck.discard(n)
        for m in pred.get(n, []):
            outdegree[m] -= 1
            if outdegree[m] == 0:
                sinks.append(m)
    path, index, node = [], {}, min(stuck)
    while node not in index:
        index[node] = len(path)
        path.append(node)
        node = next(m for m in succ[node] if m in stuck)
    cycle = path[index[node]:]
    names = [g.name(n) if n < len(g.tasks) else f"event {event_of[n][1]} on rank {event_of[n][0]}" for n in cycle]
    return [f"deadlock: dependency and queue-order cycle of {len(cycle)} nodes: " + " -> ".join(names[:12])
            + (" -> ..." if len(names) > 12 else "")]


def check(schedules: list[RankSchedule], **kwargs) -> None:
    """Raise ScheduleError with the first violation (and how many more) if the schedules are invalid."""
    errors = validate(schedules, **kwargs)
    if errors:
        more = f" (+{len(errors) - 1} more; run hpmoe verify for all)" if len(errors) > 1 else ""
        raise ScheduleError(f"schedule invalid: {errors[0]}{more}")
