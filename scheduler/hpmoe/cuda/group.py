"""One EP group on this host's GPUs (rank r on GPU devices[r]), driven from this process: compiled SSCs
loaded through the shared validating loader, inputs in, one persistent-kernel launch per direction, outputs
out. Slots have the CPU twin's layout, so inputs and outputs are the same numpy arrays as CpuTwin's."""
from __future__ import annotations

import ctypes
from typing import Callable

import numpy as np

from .. import ssc_io
from ..compiler import RankSchedule, compile_schedules
from ..config import MoeConfig
from ..graphs import tensor_specs
from ..runtime.dtypes import to_float64, to_storage
from ..runtime.native import NP_DTYPES, config_words
from ..runtime.routing import check_routing
from ..runtime.twin import OUTPUTS, WEIGHT_SLOTS, MoeInputs
from ..weight_layout import standard, stored
from ..ssc_format import Slot
from .native import ERR_LEN, RUN_IF, CudaFailure, CudaOptions, CudaPass, lib
from .trace import TRACE_WORDS

DIRECTIONS = {"fwd": 0, "bwd": 1}
FAULTS = {"none": 0, "drop-put": 1}
TIMED = {False: 0, True: 1, "start": 2, "end": 4}  # kTimedBoth / kTimedStart / kTimedEnd (cuda_group.h)


class CudaGroup:
    """All ranks in this process (rank r on GPU devices[r]), or, with local_rank, one rank of a group whose
    ranks are processes: `exchange(my_handle) -> every rank's handle` (e.g. torch.distributed
    all_gather_object) shares the CUDA IPC handles of the heaps; devices[0] is this process's GPU."""

    def __init__(self, cfg: MoeConfig, devices: list[int] | None = None,
                 schedules: list[RankSchedule] | None = None, *, local_rank: int | None = None,
                 exchange: Callable[[bytes], list[bytes]] | None = None, external: tuple[Slot, ...] = (),
                 placed: dict[Slot, int] | None = None, peer_ssc: dict[str, list[bytes]] | None = None,
                 own_ssc: dict[str, bytes] | None = None):
        """external: slots that live outside the heaps (every launch that uses one binds it: `launch(bound=)`;
        write/read/run refuse them), e.g. the tensors a PyTorch call passes in and gets back. placed: workspace
        slots at fixed device addresses for the group's lifetime (workspace.py: memory that groups whose
        launches never overlap share); one rank in this process only. peer_ssc: with local_rank, every rank's
        SSC files by direction as their own processes compiled them ({"fwd": [rank 0's, ...], "bwd": [...]});
        `schedules` then holds this rank's only, and the loader checks the group over the peers' real files.
        own_ssc: with local_rank, this rank's files by direction already serialized from `schedules` (a compile
        cache keeps them), so they are not serialized again (about 9 ms a generation at EP 8, DeepSeek-V3)."""
        self.cfg = cfg
        self.failed = False  # a launch failed (poll saw it): counters inconsistent, the group is done
        self.external = tuple(external)
        mask = sum(1 << int(s) for s in self.external)
        self.local_rank = local_rank
        self.devices = list(devices) if devices is not None else list(range(cfg.ep))
        schedules = schedules if schedules is not None else compile_schedules(cfg, ["fwd", "bwd"], list(range(cfg.ep)))
        self.schedules = schedules
        self.ssc: dict[str, list[bytes]] = {"fwd": [b""] * cfg.ep, "bwd": [b""] * cfg.ep}
        counters = {"fwd": 0, "bwd": 0}
        if own_ssc is not None and local_rank is None:
            raise ValueError("own_ssc is for one rank a process (local_rank)")
        for s in schedules:
            d = s.direction_name
            mine = own_ssc is not None and s.rank == local_rank and d in own_ssc
            self.ssc[d][s.rank] = own_ssc[d] if mine else ssc_io.to_bytes(s)
            counters[d] = max(counters[d], s.counters_needed)
        if peer_ssc is not None:
            if local_rank is None:
                raise ValueError("peer_ssc is for one rank a process (local_rank)")
            for d, files in peer_ssc.items():
                if len(files) != cfg.ep:
                    raise CudaFailure(f"peer_ssc[{d!r}] holds {len(files)} files for ep={cfg.ep}")
                if self.ssc[d][local_rank] and files[local_rank] != self.ssc[d][local_rank]:
                    raise CudaFailure(f"peer_ssc[{d!r}][{local_rank}] is not this rank's own {d} SSC")
                # The heaps' layout reserves this rank's counters; a peer file needing more is refused by the
                # loader (counter capacity), one that differs otherwise by the group check.
                self.ssc[d] = [bytes(f) for f in files]
        self.counters = counters
        self.specs = tensor_specs(cfg)
        err = ctypes.create_string_buffer(ERR_LEN)
        self.placed = dict(placed or {})
        where = (ctypes.c_uint64 * len(Slot))()
        for slot, address in self.placed.items():
            where[int(slot)] = address
        if local_rank is None:
            devs = (ctypes.c_int32 * cfg.ep)(*self.devices)
            self.handle = lib().hpmoe_cuda_group_create(config_words(cfg), counters["fwd"], counters["bwd"], devs,
                                                        mask, where, err, ERR_LEN)
        else:
            self.handle = lib().hpmoe_cuda_rank_create(config_words(cfg), counters["fwd"], counters["bwd"],
                                                       local_rank, self.devices[0], mask, where, err, ERR_LEN)
        if not self.handle:
            raise CudaFailure(err.value.decode())
        if local_rank is not None:
            self._map_peers(exchange)
        for d, files in self.ssc.items():
            for r, data in enumerate(files):
                if data:
                    self._check(lib().hpmoe_cuda_load(self.handle, r, DIRECTIONS[d], data, len(data), err, ERR_LEN),
                                err)
        self.last_ms: list[float] = [0.0] * cfg.ep

    def _map_peers(self, exchange: Callable[[bytes], list[bytes]] | None) -> None:
        if exchange is None:
            raise CudaFailure("a one-rank-per-process group needs `exchange` to share heap handles")
        err = ctypes.create_string_buffer(ERR_LEN)
        mine = ctypes.create_string_buffer(64)
        self._check(lib().hpmoe_cuda_ipc_export(self.handle, mine, err, ERR_LEN), err)
        handles = exchange(mine.raw)
        if len(handles) != self.cfg.ep:
            raise CudaFailure(f"exchange returned {len(handles)} heap handles for ep={self.cfg.ep}")
        for peer, h in enumerate(handles):
            if peer != self.local_rank:
                self._check(lib().hpmoe_cuda_ipc_open(self.handle, peer, bytes(h), err, ERR_LEN), err)

    @staticmethod
    def _check(rc: int, err) -> None:
        if rc:
            raise CudaFailure(err.value.decode())

    # ---- data ----------------------------------------------------------------------------------
    def write(self, rank: int, slot: Slot, value: np.ndarray) -> None:
        spec = self.specs[slot]
        arr = np.ascontiguousarray(np.asarray(value).reshape(spec.shape), NP_DTYPES[spec.dtype])
        err = ctypes.create_string_buffer(ERR_LEN)
        self._check(lib().hpmoe_cuda_write(self.handle, rank, int(slot), arr.ctypes.data, arr.nbytes, err, ERR_LEN), err)

    def copy_in(self, rank: int, slot: Slot, address: int, nbytes: int) -> None:
        """Whole slot from host or device memory at `address` (e.g. a torch tensor's data_ptr())."""
        err = ctypes.create_string_buffer(ERR_LEN)
        self._check(lib().hpmoe_cuda_write(self.handle, rank, int(slot), address, nbytes, err, ERR_LEN), err)

    def copy_out(self, rank: int, slot: Slot, address: int, nbytes: int) -> None:
        err = ctypes.create_string_buffer(ERR_LEN)
        self._check(lib().hpmoe_cuda_read(self.handle, rank, int(slot), address, nbytes, err, ERR_LEN), err)

    def read(self, rank: int, slot: Slot) -> np.ndarray:
        spec = self.specs[slot]
        arr = np.empty(spec.shape, NP_DTYPES[spec.dtype])
        err = ctypes.create_string_buffer(ERR_LEN)
        self._check(lib().hpmoe_cuda_read(self.handle, rank, int(slot), arr.ctypes.data, arr.nbytes, err, ERR_LEN), err)
        return arr

    def read_standard(self, rank: int, slot: Slot) -> np.ndarray:
        """read(), weights and their gradients in the standard layout whatever cfg.weights_transposed stores."""
        value = self.read(rank, slot)
        return standard(value, self.cfg.weights_transposed) if slot in WEIGHT_SLOTS else value

    def load_inputs(self, inputs: MoeInputs) -> None:
        """Routing plan (bucket check first: nothing moves if the routing does not fit), then every input
        (MoeInputs hold the standard weight layout; stored as the config says)."""
        cfg = self.cfg
        check_routing(cfg, inputs.topk_ids, inputs.topk_weights)
        wt = cfg.weights_transposed
        for r in range(cfg.ep):
            self.load_rank(r, to_storage(inputs.x[r], cfg.dtype), to_storage(stored(inputs.w1[r], wt), cfg.dtype),
                           to_storage(stored(inputs.w2[r], wt), cfg.dtype), to_storage(inputs.dy[r], cfg.dtype),
                           inputs.topk_ids[r], inputs.topk_weights[r])

    def load_rank(self, rank: int, x, w1, w2, dy, topk_ids, topk_weights) -> None:
        """One rank's inputs already in storage form (bf16/fp16 bits; w1, w2 in the config's weight layout);
        call check_routing on the group first. The routing plan is built on the device by the forward launch
        (op_kernel/cuda/routing_plan.cuh)."""
        for slot, value in {Slot.X: x, Slot.W1: w1, Slot.W2: w2, Slot.DY: dy, Slot.TOPK_IDS: topk_ids,
                            Slot.TOPK_WEIGHTS: topk_weights}.items():
            self.write(rank, slot, value)

    def outputs(self) -> dict[str, np.ndarray]:
        out = {}
        for name, slot in OUTPUTS.items():
            dtype = self.cfg.dtype if slot in (Slot.Y, Slot.DX) else "fp32"
            out[name] = np.stack([to_float64(self.read_standard(r, slot), dtype) for r in range(self.cfg.ep)])
        return out

    def raw_outputs(self) -> dict[str, np.ndarray]:
        return {name: np.stack([self.read_standard(r, slot) for r in range(self.cfg.ep)])
                for name, slot in OUTPUTS.items()}

    # ---- launches --------------------------------------------------------------------------------
    def run(self, direction: str, timeout_s: float = 30.0, fault: tuple[int, str, int] | None = None,
            trace: bool = False, plan: bool = True) -> list[float]:
        """One launch of `direction` on every rank; returns each rank's kernel time in ms. plan (forward): build
        the routing plan from the TOPK_IDS slot on the device (else the plan slots are used as written)."""
        opts = CudaOptions(timeout_ms=int(timeout_s * 1000), trace=int(trace), plan=int(plan))
        if fault is not None:
            opts.fault_rank, opts.fault_mode, opts.fault_after = fault[0], FAULTS[fault[1]], fault[2]
        ms = (ctypes.c_float * self.cfg.ep)()
        err = ctypes.create_string_buffer(ERR_LEN)
        self._check(lib().hpmoe_cuda_run(self.handle, DIRECTIONS[direction], ctypes.byref(opts), ms, err, ERR_LEN), err)
        self.last_ms = list(ms)
        return self.last_ms

    def launch(self, rank: int, direction: str, stream: int, bound: dict[Slot, int] | None = None, *,
               dw_half: bool = False, dw_accumulate: bool = False, plan: bool = False, timeout_s: float = 30.0,
               timed: bool | str = False, run_if: str = "always", tokens: tuple[int, int] | None = None,
               need_out: int = 0) -> None:
        """Enqueues one launch on `stream` (a cudaStream_t as an int, e.g. torch's current stream) and returns
        without waiting. `bound`: slots used in place at these device addresses (inputs, outputs, weights and
        their gradients; never what peers write). dw_half: bound DW1/DW2 hold the model dtype (else fp32);
        dw_accumulate: the weight gradient is added to what they hold (a framework's gradient buffer). plan:
        build the routing plan from TOPK_IDS on the device. timed: CUDA events around the persistent kernel,
        read by kernel_ms; "start" / "end" mark only the first / the last launch of a sequence timed as one.
        The speculative bucket at ep > 1 (docs/cuda.md, "Routing beyond the bucket"): run_if "speculate" (a
        planned forward: the ranks agree on the rows the routing needs and, if the bucket is too small, every
        rank stops before any row moves and marks this generation overflowed; the agreed need goes to the
        mapped host word at `need_out`), "no_overflow" / "overflow" (runs only if this generation's last
        speculative forward fitted / overflowed; otherwise does nothing, on the device); tokens: (begin, end),
        the launch routes and reduces only these tokens (a pass)."""
        if run_if not in RUN_IF:
            raise ValueError(f"run_if must be one of {sorted(RUN_IF)}, got {run_if!r}")
        if timed not in TIMED:
            raise ValueError(f"timed must be one of {list(TIMED)}, got {timed!r}")
        begin, end = tokens if tokens is not None else (0, self.cfg.tokens)
        if not 0 <= begin <= end <= self.cfg.tokens:
            raise ValueError(f"tokens=({begin}, {end}) is not a range inside [0, {self.cfg.tokens}]")
        pass_ = CudaPass(run_if=RUN_IF[run_if], token_begin=begin, token_end=end, need_out=need_out)
        table = (ctypes.c_uint64 * len(Slot))()
        for slot, address in (bound or {}).items():
            table[int(slot)] = address
        opts = CudaOptions(timeout_ms=int(timeout_s * 1000))
        err = ctypes.create_string_buffer(ERR_LEN)
        dw_mode = int(dw_half) | int(dw_accumulate) << 1  # kDwModelDtype | kDwAccumulate (device_rank.cuh)
        self._check(lib().hpmoe_cuda_launch_pass(self.handle, rank, DIRECTIONS[direction], stream, table, dw_mode,
                                                 int(plan), TIMED[timed], ctypes.byref(pass_), ctypes.byref(opts), err,
                                                 ERR_LEN), err)

    def kernel_ms(self, rank: int, direction: str) -> float:
        """The persistent kernel's ms in this rank's last timed launch of `direction`, or from the last "start"
        mark to the last "end" mark (waits for it)."""
        ms = ctypes.c_float()
        err = ctypes.create_string_buffer(ERR_LEN)
        self._check(lib().hpmoe_cuda_kernel_ms(self.handle, rank, DIRECTIONS[direction], ctypes.byref(ms), err,
                                               ERR_LEN), err)
        return ms.value

    def segment_bytes(self) -> int:
        """Device bytes of one rank's heap segment (slots in `external` take none)."""
        return int(lib().hpmoe_cuda_segment_bytes(self.handle))

    def poll(self) -> None:
        """Raises CudaFailure with the first failure's one-line report if any launch of this group failed
        (no device sync unless one did); `failed` is then set (the group refuses further launches)."""
        err = ctypes.create_string_buffer(ERR_LEN)
        if lib().hpmoe_cuda_poll(self.handle, err, ERR_LEN):
            self.failed = True
            raise CudaFailure(err.value.decode())

    def trace(self, rank: int, direction: str) -> np.ndarray:
        """[num_tasks, TRACE_WORDS] of the last traced launch: global-timer start and end (ns), the worker that
        ran it (trace.py)."""
        n = lib().hpmoe_cuda_num_tasks(self.handle, rank, DIRECTIONS[direction])
        out = np.zeros((n, TRACE_WORDS), np.uint64)
        err = ctypes.create_string_buffer(ERR_LEN)
        self._check(lib().hpmoe_cuda_trace(self.handle, rank, DIRECTIONS[direction],
                                           out.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)), err, ERR_LEN), err)
        return out

    def close(self) -> None:
        if self.handle:
            lib().hpmoe_cuda_group_destroy(self.handle)
            self.handle = None

    def __enter__(self) -> "CudaGroup":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
