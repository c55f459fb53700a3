"""The CPU twin of one EP group: compiled SSCs, the group heap, inputs in, outputs out.

Two ways to run the ranks: as thread groups of this process (`run_threads`, for tests and benchmarks) or as
separate processes that attach the heap in POSIX shared memory (`run_processes`, what `hpmoe run` and the
MindSpore integration use; see rank_main.py).
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from .. import ssc_io
from ..args import ValueCheckError, check_float
from ..compiler import RankSchedule, compile_schedules
from ..config import MoeConfig
from ..errors import ConfigError
from ..ssc_format import Slot
from ..weight_layout import standard, stored
from . import native
from .dtypes import to_float64, to_storage
from .plan_phase import plan_or_raise
from .routing import check_routing
from .shm_names import remove_stale_segments, segment_name
from .supervise import kill_all, supervise

OUTPUTS = {"y": Slot.Y, "dx": Slot.DX, "dw1": Slot.DW1, "dw2": Slot.DW2, "dtopk_weights": Slot.DTOPK_WEIGHTS}
WEIGHT_SLOTS = (Slot.W1, Slot.W2, Slot.DW1, Slot.DW2)  # stored in the config's weight layout (weight_layout.py)
FAULT_MODES = {"none": 0, "exit": 1, "fail": 2}


@dataclasses.dataclass
class MoeInputs:
    """Per-rank inputs, float64 values already representable in the compute dtype (see make_inputs)."""
    x: np.ndarray             # [ep, T, h]
    w1: np.ndarray            # [ep, E, h, 2I]
    w2: np.ndarray            # [ep, E, I, h]
    dy: np.ndarray            # [ep, T, h]
    topk_ids: np.ndarray      # [ep, T, k] int32
    topk_weights: np.ndarray  # [ep, T, k] float32


def draw_inputs(cfg: MoeConfig, seed: int, draw) -> tuple:
    """(x, w1, w2, dy) of every rank, standard layout, each from draw(rng, shape, scale): random activations
    and weights scaled so that every layer keeps unit-order values."""
    rng = np.random.default_rng(seed + 7919)
    ep, T, h, I, E = cfg.ep, cfg.tokens, cfg.hidden, cfg.inter, cfg.experts_per_rank
    return (draw(rng, (ep, T, h), 1.0), draw(rng, (ep, E, h, 2 * I), h ** -0.5), draw(rng, (ep, E, I, h), I ** -0.5),
            draw(rng, (ep, T, h), 1.0))


def make_inputs(cfg: MoeConfig, topk_ids: np.ndarray, topk_weights: np.ndarray, seed: int) -> MoeInputs:
    """draw_inputs in float64, rounded to cfg.dtype (values the compute dtype represents exactly)."""
    def rounded(rng, shape, scale):
        return to_float64(to_storage(rng.standard_normal(shape) * scale, cfg.dtype), cfg.dtype)

    return MoeInputs(*draw_inputs(cfg, seed, rounded), np.asarray(topk_ids, np.int32),
                     np.asarray(topk_weights, np.float32))


@dataclasses.dataclass
class Fault:
    """Test hook: on `rank`, after `after` handler calls of the `direction` launch, exit or fail."""
    rank: int
    mode: str = "exit"
    after: int = 1
    direction: str = "fwd"


class CpuTwin:
    def __init__(self, cfg: MoeConfig, schedules: list[RankSchedule] | None = None, shared_memory: bool = False,
                 timeout_s: float = 30.0, handlers: str = "compute", backend: str = "cpu"):
        try:  # the C++ side takes whole milliseconds as uint64: NaN, negative or 0 would unbound every wait
            check_float("timeout_s", timeout_s, 0.001, 86400.0)
        except ValueCheckError as exc:
            raise ConfigError(str(exc)) from None
        self.cfg, self.timeout_s, self.handlers, self.backend = cfg, timeout_s, handlers, backend
        if backend == "ascendc-cpu" and cfg.num_aiv != 2 * cfg.num_aic:  # MIX_AIC_1_2: two AIVs per AI core
            raise native.RuntimeFailure(f"ascendc-cpu launches {cfg.num_aic} AI cores with {2 * cfg.num_aic} AIVs, "
                                        f"but num_aiv={cfg.num_aiv}: use --workers-aiv {2 * cfg.num_aic}")
        self._previous_backend = native.current_backend()
        native.use_backend(backend)  # cpu: the twin's handlers; ascendc-cpu: the AscendC kernel on stubs
        schedules = schedules if schedules is not None else compile_schedules(cfg, ["fwd", "bwd"], list(range(cfg.ep)))
        self.ssc: dict[str, list[bytes]] = {"fwd": [b""] * cfg.ep, "bwd": [b""] * cfg.ep}
        counters = {"fwd": 0, "bwd": 0}
        for s in schedules:
            self.ssc[s.direction_name][s.rank] = ssc_io.to_bytes(s)
            counters[s.direction_name] = max(counters[s.direction_name], s.counters_needed)
        for blobs in self.ssc.values():
            if all(blobs):  # the launcher holds the whole group: every threshold against every trigger
                error, _ = native.validate_ssc(blobs)
                if error:
                    raise native.RuntimeFailure(error)
        self.layout = native.HeapLayout(cfg, counters["fwd"], counters["bwd"])
        self.stale_removed = remove_stale_segments() if shared_memory else []
        self.shm_name = segment_name() if shared_memory else None
        self.heap = native.GroupHeap(self.layout, self.shm_name)
        self.ranks: list[native.RankHandle] = []
        self.rank_pids: list[int] = []  # pids of the running rank processes (tests stop or kill them)

    # ---- data ----------------------------------------------------------------------------------
    def load_inputs(self, inputs: MoeInputs, tokens: tuple[int, int] | None = None) -> None:
        """Routing plan (bucket check first: nothing moves if the routing does not fit), then every input.
        tokens=(begin, end): the plan of those tokens only, a pass of the speculative bucket (docs/design.md;
        run it with run_threads(..., tokens=...))."""
        cfg = self.cfg
        # A pass's rows need not fit as the whole routing's would: plan_or_raise checks the pass's own.
        check_routing(cfg, inputs.topk_ids, inputs.topk_weights, bucket=tokens is None)
        wt = cfg.weights_transposed
        for r in range(cfg.ep):
            plan = plan_or_raise(cfg, inputs.topk_ids[r], tokens)  # the shared plan phase (routing_plan.h)
            put = {Slot.X: to_storage(inputs.x[r], cfg.dtype), Slot.DY: to_storage(inputs.dy[r], cfg.dtype),
                   Slot.W1: to_storage(stored(inputs.w1[r], wt), cfg.dtype),
                   Slot.W2: to_storage(stored(inputs.w2[r], wt), cfg.dtype),
                   Slot.TOPK_IDS: inputs.topk_ids[r], Slot.TOPK_WEIGHTS: inputs.topk_weights[r],
                   Slot.SEND_ROWS: plan.send_rows, Slot.SEND_COUNTS: plan.send_counts,
                   Slot.TOKEN_ROWS: plan.token_rows}
            for slot, value in put.items():
                view = self.heap.view(r, slot)
                view[...] = np.asarray(value).reshape(view.shape)

    def _view(self, rank: int, slot: Slot) -> np.ndarray:
        """A heap slot, weight gradients in the standard layout whatever the config stores."""
        view = self.heap.view(rank, slot)
        return standard(view, self.cfg.weights_transposed) if slot in WEIGHT_SLOTS else view

    def outputs(self) -> dict[str, np.ndarray]:
        """Every output of every rank as float64, stacked over ranks (dW1, dW2 in the standard layout)."""
        out = {}
        for name, slot in OUTPUTS.items():
            dtype = self.cfg.dtype if slot in (Slot.Y, Slot.DX) else "fp32"
            out[name] = np.stack([to_float64(self._view(r, slot), dtype) for r in range(self.cfg.ep)])
        return out

    def raw_outputs(self) -> dict[str, np.ndarray]:
        """Copies of the stored output bits (for bitwise comparisons), dW1, dW2 in the standard layout."""
        return {name: np.stack([self._view(r, slot).copy() for r in range(self.cfg.ep)])
                for name, slot in OUTPUTS.items()}

    # ---- ranks as threads of this process --------------------------------------------------------
    def open_ranks(self, fault: Fault | None = None) -> None:
        for r in range(self.cfg.ep):
            self.ranks.append(native.RankHandle(self.heap, r, self.ssc["fwd"][r] or None, self.ssc["bwd"][r] or None,
                                                self._options(r, fault)))

    def run_threads(self, direction: str, dynamic: bool = False, tokens: tuple[int, int] | None = None) -> None:
        """One launch on every rank (threads of this process); tokens=(begin, end): its reductions write only
        those tokens' rows (a pass, after load_inputs(..., tokens=...))."""
        if not self.ranks:
            self.open_ranks()
        begin, end = tokens if tokens is not None else (0, self.cfg.tokens)
        for r in self.ranks:
            r.set_tokens(begin, end)
        native.run(self.ranks, direction, dynamic)

    def _options(self, rank: int, fault: Fault | None) -> native.RankOptions:
        opts = native.RankOptions(timeout_ms=int(self.timeout_s * 1000), handlers=int(self.handlers == "null"))
        if fault is not None and fault.rank == rank:
            opts.fault_mode, opts.fault_after = FAULT_MODES[fault.mode], fault.after
            opts.fault_direction = native.DIRECTIONS[fault.direction]
        return opts

    # ---- ranks as processes over POSIX shared memory ---------------------------------------------
    def run_processes(self, iterations: int = 1, fault: Fault | None = None) -> None:
        """Each rank in its own process runs fwd then bwd, `iterations` times; raises with every failure."""
        if self.shm_name is None:
            raise native.RuntimeFailure("run_processes needs the heap in shared memory (shared_memory=True)")
        with tempfile.TemporaryDirectory(prefix="hpmoe-ssc-") as tmp:
            procs: list[subprocess.Popen] = []
            try:
                self._start_ranks(procs, tmp, iterations, fault)
                failures = supervise(procs, self.timeout_s, self.heap.abort)
            finally:  # an exception here (SIGTERM, Ctrl-C) must not leave rank processes behind
                kill_all(procs)
                self.rank_pids = []
        if failures:
            raise native.RuntimeFailure("; ".join(failures))

    def _start_ranks(self, procs: list, tmp: str, iterations: int, fault: Fault | None) -> None:
        """One `rank_main` process per rank, appended to `procs` as it starts (so a failure can kill it)."""
        for r in range(self.cfg.ep):
            for d in ("fwd", "bwd"):
                Path(tmp, f"rank{r}.{d}.ssc").write_bytes(self.ssc[d][r])
            opts = self._options(r, fault)
            cmd = [sys.executable, "-m", "hpmoe.runtime.rank_main", "--parent-pid", str(os.getpid()),
                   "--shm", self.shm_name, "--ssc-dir", tmp,
                   "--rank", str(r), "--config", json.dumps(self.cfg.to_json()),
                   "--counters", f"{self.layout.counters[0]},{self.layout.counters[1]}",
                   "--timeout-ms", str(opts.timeout_ms), "--iterations", str(iterations),
                   "--handlers", self.handlers, "--backend", self.backend,
                   "--fault", f"{opts.fault_mode},{opts.fault_after},"
                   f"{opts.fault_direction}"]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
            self.rank_pids.append(procs[-1].pid)

    def close(self) -> None:
        for r in self.ranks:
            r.close()
        self.ranks = []
        self.heap.close()
        native.use_backend(self._previous_backend)  # other users of `native` in this process are unaffected

    def __enter__(self) -> "CpuTwin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
