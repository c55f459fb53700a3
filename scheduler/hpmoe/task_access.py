"""Python mirror of op_kernel/runtime/task_access.h: the slots each task type's handler may read and write.

The header is the definition (the load-time validator refuses any task that breaks it); the compiler asserts
every task it writes follows this mirror (`check_tasks`), and tests/test_task_access.py compares the two
tables entry by entry through the C++ probe, so neither can drift.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

from .errors import ScheduleError
from .ssc_format import MAX_INPUTS, MAX_OUTPUTS, Direction, Slot, TaskType

ACCESS_FWD, ACCESS_BWD, ACCESS_REMOTE_OUTPUT = 1, 2, 4
ACCESS_WEIGHTS_STD, ACCESS_WEIGHTS_T = 8, 16  # rows only for one weight layout (config weights_transposed)
ACCESS_UNFUSED, ACCESS_FUSED = 32, 64  # rows only without / with fused_swiglu (H's column order differs)

ACTIVATION_SLOTS = frozenset({Slot.X, Slot.RECV_X, Slot.H, Slot.A, Slot.Y_EXPERT, Slot.RET_Y, Slot.Y, Slot.DY,
                              Slot.RECV_DY, Slot.DA, Slot.DH, Slot.DX_EXPERT, Slot.RET_DX, Slot.DX})


class Access(NamedTuple):
    task_type: TaskType
    flags: int
    inputs: tuple[frozenset[Slot], ...]   # allowed slots per input position; empty: unused
    outputs: tuple[frozenset[Slot], ...]


def _row(task_type: TaskType, flags: int, inputs: list, outputs: list) -> Access:
    def sets(items: list, width: int) -> tuple[frozenset[Slot], ...]:
        out = [frozenset(i) if isinstance(i, frozenset) else frozenset({i}) for i in items]
        return tuple(out + [frozenset()] * (width - len(out)))
    return Access(task_type, flags, sets(inputs, MAX_INPUTS), sets(outputs, MAX_OUTPUTS))


F, B, R, S, T = ACCESS_FWD, ACCESS_BWD, ACCESS_REMOTE_OUTPUT, Slot, TaskType
WS, WT, U, FU = ACCESS_WEIGHTS_STD, ACCESS_WEIGHTS_T, ACCESS_UNFUSED, ACCESS_FUSED
TASK_ACCESS: tuple[Access, ...] = (
    _row(T.ENTRY_SIGNAL, F | B | R, [], [S.PEER_READY]),
    _row(T.COUNT_PUT, F | R, [S.SEND_COUNTS, S.PEER_READY], [S.RECV_COUNTS]),
    _row(T.DISPATCH_PUT, F | R, [S.X, S.SEND_ROWS, S.PEER_READY], [S.RECV_X]),
    _row(T.GMM, F | U, [S.RECV_X, S.W1, S.RECV_COUNTS], [S.H]),
    _row(T.GMM, F, [S.A, S.W2, S.RECV_COUNTS], [S.Y_EXPERT]),
    _row(T.SWIGLU, F | U, [S.H, S.RECV_COUNTS], [S.A]),
    _row(T.SWIGLU, F | U, [S.H, S.H, S.RECV_COUNTS], [S.A]),  # column block: H gate, H up (act_split.py)
    _row(T.COMBINE_PUT, F | R, [S.Y_EXPERT, S.RECV_COUNTS], [S.RET_Y]),
    _row(T.COMBINE_PUT, B | R, [S.DX_EXPERT, S.RECV_COUNTS], [S.RET_DX]),
    _row(T.COMBINE_REDUCE, F, [S.RET_Y, S.TOPK_WEIGHTS, S.TOKEN_ROWS], [S.Y]),
    _row(T.BWD_DISPATCH_PUT, B | R, [S.DY, S.TOPK_WEIGHTS, S.SEND_ROWS, S.PEER_READY], [S.RECV_DY]),
    _row(T.GMM_TRANS_B, B | U, [S.RECV_DY, S.W2, S.RECV_COUNTS], [S.DA]),
    _row(T.GMM_TRANS_B, B, [S.DH, S.W1, S.RECV_COUNTS], [S.DX_EXPERT]),
    _row(T.GMM_WEIGHT_GRAD, B | WS, [S.A, S.RECV_DY, S.RECV_COUNTS], [S.DW2]),
    _row(T.GMM_WEIGHT_GRAD, B | WS | U, [S.RECV_X, S.DH, S.RECV_COUNTS], [S.DW1]),
    _row(T.GMM_WEIGHT_GRAD, B | WT, [S.RECV_DY, S.A, S.RECV_COUNTS], [S.DW2]),
    _row(T.GMM_WEIGHT_GRAD, B | WT | U, [S.DH, S.RECV_X, S.RECV_COUNTS], [S.DW1]),
    # fused: input 3 is the whole of dH (a wait on every dH producer; no handler reads it)
    _row(T.GMM_WEIGHT_GRAD, B | WS | FU, [S.RECV_X, S.DH, S.RECV_COUNTS, S.DH], [S.DW1]),
    _row(T.GMM_WEIGHT_GRAD, B | WT | FU, [S.DH, S.RECV_X, S.RECV_COUNTS, S.DH], [S.DW1]),
    _row(T.SWIGLU_GRAD, B | U, [S.DA, S.H, S.RECV_COUNTS], [S.DH]),
    _row(T.SWIGLU_GRAD, B | U, [S.DA, S.H, S.H, S.RECV_COUNTS], [S.DH, S.DH]),  # column block: gate, up of H and dH
    _row(T.BWD_COMBINE_REDUCE, B, [S.RET_DX, S.TOKEN_ROWS], [S.DX]),
    _row(T.TOPK_WEIGHT_GRAD, B, [S.DY, S.RET_Y, S.TOKEN_ROWS], [S.DTOPK_WEIGHTS]),
    _row(T.ADD, F | B, [ACTIVATION_SLOTS, ACTIVATION_SLOTS], [ACTIVATION_SLOTS]),
    # fused_swiglu: H's interleaved columns of A's block (ssc_format.FUSED_SWIGLU_GROUP)
    _row(T.GMM_SWIGLU, F | FU, [S.RECV_X, S.W1, S.RECV_COUNTS], [S.H, S.A]),
    _row(T.GMM_SWIGLU_GRAD, B | FU, [S.RECV_DY, S.W2, S.H, S.RECV_COUNTS], [S.DH, S.DH]),
)
del F, B, R, S, T, WS, WT, U, FU


def slot_mask(slots: Iterable[Slot]) -> int:
    return sum(1 << int(s) for s in set(slots))


def matches(row: Access, direction: Direction, inputs: list[int], outputs: list[int],
            weights_transposed: bool = False, fused_swiglu: bool = False) -> bool:
    """Whether a task with these slots (in position order, unused positions left out) follows `row`."""
    if not row.flags & (ACCESS_FWD if direction == Direction.FORWARD else ACCESS_BWD):
        return False
    if row.flags & (ACCESS_WEIGHTS_STD if weights_transposed else ACCESS_WEIGHTS_T):
        return False
    if row.flags & (ACCESS_UNFUSED if fused_swiglu else ACCESS_FUSED):
        return False
    padded = list(inputs) + [None] * (MAX_INPUTS - len(inputs)), list(outputs) + [None] * (MAX_OUTPUTS - len(outputs))
    return all((slot is None and not allowed) or (slot is not None and slot in allowed)
               for got, want in zip(padded, (row.inputs, row.outputs)) for slot, allowed in zip(got, want))


_BY_TYPE: dict[TaskType, list[Access]] = {}
for _access in TASK_ACCESS:
    _BY_TYPE.setdefault(_access.task_type, []).append(_access)


def check_tasks(tasks, direction: Direction, weights_transposed: bool = False, fused_swiglu: bool = False) -> None:
    """The writer's assertion: every task's slots follow the table (raises ScheduleError naming the first)."""
    seen: set[tuple] = set()
    for t in tasks:
        key = (t.task_type, tuple(r.slot for r in t.inputs), tuple(r.slot for r in t.outputs))
        if key in seen:
            continue
        if not any(matches(row, direction, key[1], key[2], weights_transposed, fused_swiglu)
                   for row in _BY_TYPE.get(t.task_type, ())):
            raise ScheduleError(f"{t.describe()} reads {[s.name for s in key[1]]} and writes "
                                f"{[s.name for s in key[2]]}, which op_kernel/runtime/task_access.h does not allow")
        seen.add(key)
