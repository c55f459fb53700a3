"""The AscendC kernel's synchronisation protocol, checked on the stub's call log of real fwd and bwd launches
(ranks as threads): counters are whole 64-byte lines updated only by atomic DMA after a barrier; a put's
payload precedes its barrier, which precedes its signal; every spin re-reads through the cache; AIC code
touches only CTQs and AIV code only VTQs; no reserved cross-core flag id is used. Each check is also shown to
catch a log that breaks its rule."""
from __future__ import annotations

import numpy as np
import pytest

import protocol_check as pc
from ascend_helpers import case, run


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ascend-log")
    cfg, inputs, _, schedules = case("skewed", seed=2, dtype="bf16", ep=3, topk=3)
    _, _, extra = run("ascendc-cpu", cfg, inputs, schedules, iterations=1, log_dir=tmp)
    return cfg, extra["segment_bytes"], {d: pc.load(tmp / f"{d}0.log") for d in ("fwd", "bwd")}


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_log_covers_every_core(launches, direction):
    cfg, _, logs = launches
    cores = logs[direction].cores()
    assert len(cores) == cfg.ep * 3 * cfg.num_aic
    ops = set(int(x) for x in logs[direction].records["op"])
    assert {pc.COPY_OUT, pc.DCCI, pc.BARRIER, pc.ATOMIC_ADD, pc.MATMUL} <= ops
    log, segment_bytes = logs[direction], launches[1]
    remote_puts = [x for x in log.records if x["op"] == pc.COPY_OUT and x["arg"] == 0
                   and log.segment_rank(int(x["addr"]), segment_bytes) not in (None, int(x["rank"]))]
    counter_reads = [x for x in log.records if x["op"] == pc.GM_READ and log.counter_rank(int(x["addr"])) is not None]
    assert remote_puts and counter_reads, "the checks below would be vacuous"


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_protocol_holds(launches, direction):
    cfg, segment_bytes, logs = launches
    log = logs[direction]
    assert pc.check_counter_atomics(log) == []
    assert pc.check_puts_signal_after_payload(log, segment_bytes) == []
    assert pc.check_spins_reread_through_cache(log) == []
    assert pc.check_queue_types(log, cfg.num_aic) == []
    assert pc.check_flags_and_kernel_type(log) == []
    assert pc.check_first_launch_handshake(log) == []
    assert any(r["first_use"] for r in log.ranks) == (direction == "fwd"), "only forward invocation 1 sets up"
    assert not np.any(np.isin(log.records["op"], [pc.FLAG_SET, pc.FLAG_WAIT])), "the kernel uses no hardware flags"


def _edit(log, keep=None, change=None):
    recs = log.records.copy()
    if change is not None:
        change(recs)
    if keep is not None:
        recs = recs[keep(recs)]
    return pc.Launch(recs, log.ranks)


def test_checks_catch_broken_logs(launches):
    cfg, segment_bytes, logs = launches
    log = logs["fwd"]
    no_barriers = _edit(log, keep=lambda r: r["op"] != pc.BARRIER)
    assert pc.check_counter_atomics(no_barriers)
    assert pc.check_puts_signal_after_payload(no_barriers, segment_bytes)
    no_dcci = _edit(log, keep=lambda r: r["op"] != pc.DCCI)
    assert pc.check_spins_reread_through_cache(no_dcci)

    def misalign(recs):
        i = np.flatnonzero((recs["op"] == pc.COPY_OUT) & (recs["arg"] == 1))[0]
        recs["addr"][i] += 4
    assert pc.check_counter_atomics(_edit(log, change=misalign))

    def swap_core_types(recs):
        recs["core_type"] = np.where(recs["core_type"] == pc.AIC, pc.AIV, pc.AIC)
    assert pc.check_queue_types(_edit(log, change=swap_core_types), cfg.num_aic)

    def use_syncall_flag(recs):
        recs["op"][0], recs["arg"][0] = pc.FLAG_SET, 12
    assert pc.check_flags_and_kernel_type(_edit(log, change=use_syncall_flag))

    def drop_signals(recs):
        recs["op"][(recs["op"] == pc.COPY_OUT) & (recs["arg"] == 1)] = pc.GM_READ
    assert pc.check_puts_signal_after_payload(_edit(log, change=drop_signals), segment_bytes)

    def skip_hello_reads(recs):  # a core that signals without waiting for the handshake
        for r in log.ranks:
            inside = (recs["addr"] >= r["handshake"]) & (recs["addr"] < r["handshake"] + len(log.ranks) * pc.HELLO)
            recs["op"][(recs["op"] == pc.GM_READ) & inside] = pc.DCCI
    assert pc.check_first_launch_handshake(_edit(log, change=skip_hello_reads))
    assert pc.check_first_launch_handshake(no_barriers)  # hellos may overtake the zeros
    first_zero = np.flatnonzero((log.records["op"] == pc.COPY_OUT) & (log.records["addr"] == log.ranks[0]["zero"]))[0]
    assert pc.check_first_launch_handshake(_edit(log, keep=lambda r: np.arange(len(r)) != first_zero))
