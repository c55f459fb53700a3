"""The C++ load-time validator (op_host/ssc_loader.h) refuses what its handlers cannot run safely, with one
line naming rank, task, field and value; `hpmoe verify` runs it, and it and `hpmoe inspect` never end in a
traceback. The issue-7 examples: each passed the loader and `verify` before this validator existed."""
from __future__ import annotations

import re

import numpy as np
import pytest

from hpmoe import cli
from hpmoe.verify_cmd import verify_files
from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config
from hpmoe import ssc_io
from hpmoe.runtime import native
from hpmoe.ssc_format import CONFIG_DTYPE, CONFIG_MIXED_QUEUES, HEADER_DTYPE, NO_SLOT, Section, Slot, TaskType

from ssc_edit import edit, first_task, records, restamp

pytestmark = pytest.mark.skipif(not native.library_path("cpu").exists(),
                                reason=f"C++ library not built at {native.library_path('cpu')}: run ./build.sh test")

CFG = make_config("small", {"ep": 2})


@pytest.fixture(scope="module")
def group() -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {"fwd": [], "bwd": []}
    for s in compile_schedules(CFG, ["fwd", "bwd"], [0, 1]):
        out[s.direction_name].append(ssc_io.to_bytes(s))
    return out


def refused(blobs: list[bytes], pattern: str) -> str:
    error, _ = native.validate_ssc(blobs)
    assert error and "\n" not in error and re.search(pattern, error), error
    return error


def test_valid_group_and_lone_files_pass(group):
    for d in ("fwd", "bwd"):
        assert native.validate_ssc(group[d]) == ("", True)
        assert all(native.validate_ssc([b]) == ("", False) for b in group[d])


def test_combine_reduce_naming_another_slot_as_returned_rows_is_refused(group):
    """The region [0, T) x h of x lies inside x, so only the access table catches it; at run time the handler
    would index x with token_rows up to ep*C rows and read past it (the issue's SIGSEGV)."""
    data = group["fwd"][0]
    task = first_task(data, TaskType.COMBINE_REDUCE)
    bad = edit(edit(data, Section.TASKS, task, "inputs", int(Slot.X), "slot", 0), Section.TASKS, task, "inputs",
               CFG.tokens, "rows", 0)
    refused([bad], rf"^rank 0 fwd SSC: task {task} \(COMBINE_REDUCE\) field inputs\[0\]\.slot: 0 \(x\); "
                   r"its handler takes ret_y there$")
    refused([bad, group["fwd"][1]], r"field inputs\[0\]\.slot: 0 \(x\)")


# Same-shape substitutions: before, each ran to completion with wrong outputs and no error.
WRONG_SLOTS = [
    ("fwd", TaskType.SWIGLU, "outputs", 0, Slot.Y_EXPERT, r"outputs\[0\]\.slot: 12 \(y_expert\).*takes a there"),
    ("fwd", TaskType.COMBINE_PUT, "inputs", 0, Slot.RECV_X, r"inputs\[0\]\.slot: 9 \(recv_x\).*takes y_expert there"),
    ("fwd", TaskType.GMM, "outputs", 0, Slot.Y_EXPERT, r"outputs\[0\]\.slot: 12 \(y_expert\).*takes h there"),
    ("bwd", TaskType.BWD_COMBINE_REDUCE, "inputs", 0, Slot.RECV_DY, r"inputs\[0\]\.slot: 16 \(recv_dy\)"),
    ("bwd", TaskType.TOPK_WEIGHT_GRAD, "inputs", 1, Slot.RET_DX, r"inputs\[1\]\.slot: 20 \(ret_dx\).*takes ret_y"),
    ("bwd", TaskType.SWIGLU_GRAD, "outputs", 0, Slot.H, r"outputs\[0\]\.slot: 10 \(h\).*takes dh there"),
    ("bwd", TaskType.COMBINE_PUT, "outputs", 0, Slot.RET_Y, r"outputs\[0\]\.slot: 13 \(ret_y\).*takes ret_dx"),
]


@pytest.mark.parametrize("direction,task_type,field,pos,slot,pattern", WRONG_SLOTS,
                         ids=[f"{t.name}.{f}{p}={s.name}" for _, t, f, p, s, _ in WRONG_SLOTS])
def test_wrong_slot_edits_are_refused(group, direction, task_type, field, pos, slot, pattern):
    data = group[direction][0]
    task = first_task(data, task_type)
    bad = edit(data, Section.TASKS, task, field, int(slot), "slot", pos)
    refused([bad], rf"^rank 0 {direction} SSC: task {task} \({task_type.name}\) field " + pattern)


def test_unused_position_filled_is_refused(group):
    data = group["fwd"][0]
    task = first_task(data, TaskType.SWIGLU)
    bad = edit(data, Section.TASKS, task, "inputs", int(Slot.X), "slot", 3)
    refused([bad], r"field inputs\[3\]\.slot: 0 \(x\); its handler takes nothing \(unused\) there")


@pytest.mark.parametrize("threshold", [0, 0xFFFFFFFF])
def test_thresholds_zero_and_all_ones_are_refused(group, threshold, tmp_path, capsys):
    bad = edit(group["fwd"][0], Section.EVENTS, 0, "threshold", threshold)
    refused([bad], rf"^rank 0 fwd SSC: event 0 field threshold: {threshold} ")
    refused([bad, group["fwd"][1]], rf"event 0 field threshold: {threshold} ")
    path = tmp_path / "rank0.fwd.ssc"
    path.write_bytes(bad)
    assert cli.main(["verify", str(path)]) == 2  # rank-local verify used to accept 0xFFFFFFFF
    assert "ok" not in capsys.readouterr().out


def test_lone_rank_threshold_bound(group):
    """A remote-triggered event on one rank's file: its own triggers plus 1 .. (ep-1)*C/tile_m from peers."""
    data = group["fwd"][0]
    events, _ = records(data, Section.EVENTS)
    e = int(np.nonzero(events["flags"] & 1)[0][0])
    bound = (CFG.ep - 1) * (CFG.recv_rows_per_src // CFG.tile_m)
    tasks, _ = records(data, Section.TASKS)
    local = int(((tasks["trigger_event"] == e) & (tasks["trigger_rank"] == 0)).sum())
    assert native.validate_ssc([edit(data, Section.EVENTS, e, "threshold", local + bound)])[0] == ""
    refused([edit(data, Section.EVENTS, e, "threshold", local + bound + 1)], rf"event {e} field threshold")
    refused([edit(data, Section.EVENTS, e, "threshold", local)], rf"event {e} field threshold")
    # The group holds every trigger: one more than counted is refused exactly.
    g_bad = edit(data, Section.EVENTS, e, "threshold", int(events["threshold"][e]) + 1)
    refused([g_bad, group["fwd"][1]], rf"^rank 0 fwd SSC event {e} field threshold: \d+, but the group's files "
                                      r"trigger it \d+ times$")


def test_group_remote_flag_must_match(group):
    data = group["fwd"][0]
    events, _ = records(data, Section.EVENTS)
    local_only = int(np.nonzero((events["flags"] & 1) == 0)[0][0])
    bad = edit(data, Section.EVENTS, local_only, "flags", 1)
    assert native.validate_ssc([bad])[0]  # alone: threshold now must exceed the local triggers
    refused([bad, group["fwd"][1]], r"field (flags|threshold)")


def test_region_outside_tensor_and_remote_reads_are_refused(group):
    data = group["fwd"][0]
    task = first_task(data, TaskType.SWIGLU)
    refused([edit(data, Section.TASKS, task, "outputs", 10 ** 6, "row_offset", 0)],
            rf"^rank 0 fwd SSC: task {task} field outputs\[0\]: region rows \[1000000,\+16\) .* exceeds a ")
    refused([edit(data, Section.TASKS, task, "inputs", 1, "rank", 0)], r"field inputs\[0\]\.flags")
    both = edit(edit(data, Section.TASKS, task, "inputs", 1, "rank", 0), Section.TASKS, task, "inputs", 1, "flags", 0)
    refused([both], r"field inputs\[0\]\.(flags|rank)")


def test_tensor_record_must_match_the_config(group):
    data = group["fwd"][0]
    tensors, _ = records(data, Section.TENSORS)
    i = int(np.nonzero(tensors["slot"] == Slot.RET_Y)[0][0])
    refused([edit(data, Section.TENSORS, i, "dims", 10 ** 6, pos=0)], rf"tensor {i} \(ret_y\) field dims\[0\]: 1000000")
    refused([edit(data, Section.TENSORS, i, "flags", 0)], rf"tensor {i} \(ret_y\) field flags: 0")


def test_queue_and_task_records(group):
    data = group["fwd"][0]
    refused([edit(data, Section.QUEUES, 0, "worker", 5)], r"queue 0 field worker: 5")
    entries, off = records(data, Section.QUEUE_ENTRIES)
    twice = bytearray(data)
    entries[1] = entries[0]
    twice[off:off + entries.nbytes] = entries.tobytes()
    refused([restamp(twice)], r"appears in a queue twice|is in no queue")
    refused([edit(data, Section.TASKS, 0, "task_index", 99)], r"task 0 \(\w+\) field task_index: 99")
    bwd_type = edit(data, Section.TASKS, first_task(data, TaskType.SWIGLU), "task_type", int(TaskType.SWIGLU_GRAD))
    refused([bwd_type], r"field (task_type|inputs|outputs|queue_type)")


# ---- the CLI: one line and exit 2, never a traceback ----

def _write(tmp_path, data: bytes, name="rank0.fwd.ssc"):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_ndim_5_and_task_type_out_of_range_are_one_line(group, tmp_path, capsys):
    data = group["fwd"][0]
    cases = {"ndim": edit(data, Section.TENSORS, 0, "ndim", 5),
             "task_type": edit(data, Section.TASKS, 3, "task_type", 99)}
    for name, bad in cases.items():
        path = _write(tmp_path, bad)
        for argv in (["verify", path], ["inspect", path], ["inspect", "--json", path]):
            assert cli.main(argv) == 2, (name, argv)
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and f"field {name}" in err and "Traceback" not in err, (name, argv, err)


def test_verify_max_errors_zero_is_refused(group, tmp_path, capsys):
    path = _write(tmp_path, edit(group["fwd"][0], Section.EVENTS, 0, "threshold", 0))
    assert cli.main(["verify", "--max-errors", "0", path]) == 2
    out = capsys.readouterr()
    assert "ok" not in out.out and "--max-errors" in out.err and out.err.count("\n") == 1, out.err
    with pytest.raises(Exception, match=r"--max-errors 0: must be at least 1"):  # the check behind the parser's
        verify_files([path], 0)


def test_verify_runs_the_cpp_validator(group, tmp_path, capsys):
    """A wrong-slot edit the Python checks alone do not see is reported by verify through the C++ loader."""
    data = group["fwd"][0]
    task = first_task(data, TaskType.SWIGLU)
    paths = [_write(tmp_path, edit(data, Section.TASKS, task, "outputs", int(Slot.Y_EXPERT), "slot", 0)),
             _write(tmp_path, group["fwd"][1], "rank1.fwd.ssc")]
    assert cli.main(["verify", *paths]) == 2
    out = capsys.readouterr()
    assert "C++ loader: rank 0 fwd SSC: task" in out.err and "FAILED" in out.out


def test_field_sweep_never_tracebacks(group, tmp_path, capsys):
    """Boundary values written into every 4-byte word of the records (CRC re-stamped): inspect and verify end
    in 0 or in 2 with a last line naming the problem, never in an exception."""
    data = group["bwd"][1]
    header = 192
    rng = np.random.default_rng(7)
    words = sorted(set(range(header, len(data) - 4, 4)) & set(rng.choice(np.arange(header, len(data) - 4, 4), 150,
                                                                          replace=False).tolist()))
    codes = {0: 0, 2: 0}
    for k, word in enumerate(words):
        value = [0, 1, 5, 0xFFFF, 0xFFFFFFFF, 0x80000000][k % 6]
        bad = bytearray(data)
        bad[word:word + 4] = value.to_bytes(4, "little")
        path = _write(tmp_path, restamp(bad), "rank1.bwd.ssc")
        for argv in (["verify", path], ["inspect", "--json", path]):
            rc = cli.main(argv)
            out = capsys.readouterr()
            assert rc in (0, 2) and "Traceback" not in out.err, (word, value, argv, out.err)
            codes[rc] += 1
    assert codes[2] > 50, codes  # most boundary values are refused


def _header_flags(data: bytes, flags: int) -> bytes:
    out = bytearray(data)
    off = HEADER_DTYPE.fields["config"][1] + CONFIG_DTYPE.fields["flags"][1]
    out[off:off + 4] = int(flags).to_bytes(4, "little")
    return restamp(out)


def test_mixed_queues_vector_tasks_in_cube_queues_need_the_flag():
    """Mixed queues are legal only under kConfigMixedQueues, and only one way (vector tasks on cube queues)."""
    shared = make_config("small", {"ep": 2, "mixed_queues": True})
    blobs = {d: [ssc_io.to_bytes(s) for s in compile_schedules(shared, [d], [0, 1])] for d in ("fwd", "bwd")}
    for d in ("fwd", "bwd"):
        assert native.validate_ssc(blobs[d]) == ("", True)
        flags = shared.flags & ~CONFIG_MIXED_QUEUES
        refused([_header_flags(blobs[d][0], flags)] + blobs[d][1:],
                r"(config|queue \d+ entry \d+: task \d+).*(other queue type|queue_type)")
    # The reverse (a cube task on a vector queue) stays refused with the flag on.
    data = blobs["fwd"][0]
    entries, off = records(data, Section.QUEUE_ENTRIES)
    queues, _ = records(data, Section.QUEUES)
    tasks, _ = records(data, Section.TASKS)
    vtq = int(np.nonzero(queues["queue_type"] == 1)[0][0])
    gmm_entry = int(np.nonzero(tasks["task_type"][entries] == int(TaskType.GMM))[0][0])
    vtq_entry = int(queues[vtq]["first_entry"])
    swapped = entries.copy()
    swapped[gmm_entry], swapped[vtq_entry] = entries[vtq_entry], entries[gmm_entry]
    out = bytearray(data)
    out[off:off + swapped.nbytes] = swapped.tobytes()
    refused([restamp(out)] + blobs["fwd"][1:], r"queue \d+ entry \d+: task \d+")
