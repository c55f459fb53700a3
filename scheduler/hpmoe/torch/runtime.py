"""The state behind hpmoe's PyTorch op for one MoE-FFN shape and EP group: compiled schedules, shape buckets
and heap generations (hpmoe.torch.moe_ffn explains them), and failure polling."""
from __future__ import annotations

import functools
import itertools
import os
import time
import weakref

import torch
import torch.distributed as dist

from .. import ssc_io
from ..compiler import compile_schedules
from ..config import make_config, round_up
from ..cuda.group import CudaGroup
from ..cuda.native import CudaFailure, blocks_per_worker
from ..errors import HpmoeError
from ..gmm_split import default_expert_aligned, default_first_gmm_pool, too_few_row_tiles
from ..speculative_bucket import GROWTH, first_rows, grown_rows, ladder_rows, pass_ranges
from ..ssc_format import FUSED_SWIGLU_GROUP, Slot
from ..token_split import auto_token_tile
from ..wgrad_split import default_wgrad_n_block
from ..workspace import plan_workspace

DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}
_RUNTIMES: "weakref.WeakValueDictionary[int, MoeFfnRuntime]" = weakref.WeakValueDictionary()
_LEASES: dict[int, "_Lease"] = {}  # held by forwards whose backward is still to come (custom-op token -> lease)
_ids = itertools.count(1)
_NEED_RING = 256  # speculative forwards whose agreed need the host has not read yet, at most (> overflow_lag)
# What a call binds to PyTorch's tensors (ops.py): no bytes for them in the heaps.
EXTERNAL_SLOTS = (Slot.X, Slot.TOPK_IDS, Slot.TOPK_WEIGHTS, Slot.W1, Slot.W2, Slot.Y, Slot.DY, Slot.DX, Slot.DW1,
                  Slot.DW2, Slot.DTOPK_WEIGHTS)


@functools.lru_cache(maxsize=64)
def _compiled(cfg, rank: int) -> tuple[tuple, dict[str, bytes]]:
    """This rank's SSCs of a bucket config (schedules, and their files by direction), compiled once a process:
    every heap generation of a bucket, and every layer of a model whose experts share a shape, runs the same
    schedules. Only this rank's: a single-rank compile is byte for byte the group compile's file for that rank
    (rank symmetry; tests/test_cli.py), and the other ranks' files come from their own processes (_new_group).
    The early steps of a training run make generations and grow buckets; a DeepSeek-V3 bucket at EP 8 (8192
    tokens) took 2.4 s to compile for all ranks, about 0.35 s for one (the workstation). Read-only after this."""
    schedules = tuple(compile_schedules(cfg, ["fwd", "bwd"], [rank]))
    return schedules, {s.direction_name: ssc_io.to_bytes(s) for s in schedules}


# Where a heap generation's host time goes (bucket_stats()["group_parts"]), in the order it is spent.
GROUP_PARTS = ("compile", "files", "heap", "handles", "mapping", "barrier")


class _PartClock:
    """Adds the seconds since the last lap to `parts[name]` at each lap."""

    def __init__(self, parts: dict):
        self.parts, self.last = parts, time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.parts[name] += now - self.last
        self.last = now


class _Lease:
    """One heap generation lent to one forward until its backward ran (or its autograd graph was dropped)."""

    def __init__(self, pool: list, group: CudaGroup, key: tuple):
        self.pool, self.group, self.key, self.id = pool, group, key, next(_ids)

    def keep(self) -> int:
        """Registers the lease under a token id that the backward op finds it by."""
        _LEASES[self.id] = self
        return self.id

    def release(self) -> None:
        _LEASES.pop(self.id, None)
        if self.group is not None and not self.group.failed:  # a failed heap never returns to the pool
            self.pool.append(self.group)  # stream order makes reuse safe: later work runs after this call's
        self.group = None


class LeaseHold:
    """What an eager autograd context holds: gives the generation back if the graph is dropped unused."""

    def __init__(self, lease: _Lease | None):
        self.lease = lease

    def __del__(self):
        if self.lease is not None:
            self.lease.release()


class MoeFfnRuntime:
    """The compiled schedules, heaps and launch state of one MoE-FFN shape on one EP group: share one per
    layer shape (layers of one shape may share it; each in-flight forward gets its own heap generation)."""

    def __init__(self, hidden_size: int, intermediate_size: int, num_local_experts: int, topk: int, *,
                 group=None, capacity_factor: float | None = None, dtype: torch.dtype = torch.bfloat16,
                 tile_m: int | None = None, num_aic: int | None = None, num_aiv: int | None = None,
                 wgrad_tile: int = 0, token_tile: int = 0, sync_free: bool = False, timeout_s: float = 60.0,
                 device=None, wgrad_n_block: int | None = None, fuse_swiglu: bool | None = None,
                 expert_aligned: bool | None = None, share_workspace: bool = True,
                 first_gmm_pool: bool | None = None, speculative: bool | None = None):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be torch.bfloat16 or torch.float16, got {dtype}")
        distributed = dist.is_available() and dist.is_initialized()
        self.group = group if group is not None or not distributed else dist.group.WORLD
        self.ep = dist.get_world_size(self.group) if distributed else 1
        self.rank = dist.get_rank(self.group) if distributed else 0
        self.hidden, self.inter, self.experts, self.topk = hidden_size, intermediate_size, num_local_experts, topk
        self.capacity_factor, self.dtype, self.timeout_s = capacity_factor, dtype, timeout_s
        self.wgrad_tile, self.token_tile = wgrad_tile, token_tile  # 0: the compiler's choice
        # Weight-gradient units of this many columns (wgrad_split.py; 0: whole widths; None: the measured default,
        # per token count: wider units where experts get few rows).
        self.wgrad_n_block = wgrad_n_block
        # fuse_swiglu: SwiGLU and its gradient in the GMM tiles' epilogues (graphs.py, handlers_fused.cuh; I a
        # multiple of FUSED_SWIGLU_GROUP). Opt-in: measured on one H200 (benchmarks/RESULTS.md, session 7), the
        # fused forward is faster (Mixtral-8x7B 4096 tokens 7.7-8.0 -> 7.55 ms, DeepSeek-V3 1024 1.91 -> 1.75) but
        # the fused backward slower (Mixtral 15.0 -> 16.5 ms, DeepSeek-V3 8192 26.3 -> 27.4), as its epilogue
        # reads H and writes dH while the tensor cores wait. None: the measured default (off).
        if fuse_swiglu and intermediate_size % FUSED_SWIGLU_GROUP:
            raise ValueError(f"fuse_swiglu needs intermediate_size={intermediate_size} to be a multiple of "
                             f"{FUSED_SWIGLU_GROUP}")
        self.fuse_swiglu = bool(fuse_swiglu)
        # expert_aligned: each local expert's rows start on a row-tile boundary (kConfigExpertAligned), so a GMM
        # task runs one GEMM tile, not one per expert in its row tile. None: per shape, the measured rule
        # (gmm_split.default_expert_aligned).
        self.expert_aligned = None if expert_aligned is None else bool(expert_aligned)
        # first_gmm_pool: under mixed queues, the first GMM and its SwiGLU step claimed in panel order too
        # (worker_queues._first_stage). None: per shape, the measured rule (gmm_split.default_first_gmm_pool).
        self.first_gmm_pool = None if first_gmm_pool is None else bool(first_gmm_pool)
        # EP > 1: a bucket that holds any routing (C = T * min(k, E_local)), so no call reads the routing on
        # the host; costs receive buffers for the worst case (heap_bytes()). EP 1 always works this way.
        self.sync_free = sync_free
        # EP > 1 otherwise (or `speculative=True`, also at EP 1, where tests drive it on one GPU): the speculative
        # bucket (docs/cuda.md, "Routing beyond the bucket"). Each forward runs in the bucket its shape has now;
        # the ranks agree on the routing's need inside the launch, and a forward that does not fit stops before
        # any row moves and runs as passes of fewer tokens that do (launches enqueued behind it that do nothing
        # otherwise). The host reads each forward's agreed need `overflow_lag` forwards later (mapped memory; it
        # waits only if the GPU is that far behind) and grows the bucket then, on every rank at the same call.
        self.speculative = self.ep > 1 and not sync_free if speculative is None else bool(speculative)
        if self.speculative and sync_free:
            raise ValueError("speculative=True and sync_free=True exclude each other: sync_free's bucket holds any "
                             "routing")
        self.overflow_lag = int(os.environ.get("HPMOE_OVERFLOW_LAG", "16"))
        if not 1 <= self.overflow_lag < _NEED_RING - 1:
            raise ValueError(f"HPMOE_OVERFLOW_LAG={self.overflow_lag}: must be in [1, {_NEED_RING - 1})")
        self._rows: dict[tuple[int, bool], int] = {}  # (tokens, transposed) -> the bucket C now in use
        self._forwards = 0                            # speculative forwards so far (the same count on every rank)
        self._unread: dict[int, tuple] = {}           # forward number -> (event after it, bucket key, C)
        self._needs = None                            # pinned [_NEED_RING] int32: each forward's agreed need
        self.overflows_seen = 0   # forwards the host has read as overflowed (they ran as passes)
        self.overflow_waits = 0   # reads that had to wait for the GPU (0 while it is less than the lag behind)
        # One copy per shape bucket of what no launch keeps (workspace.py): generations hold only what their
        # forward saves and what peers write (DeepSeek-V3 experts, 8192 tokens, EP 1: 2.5 GiB a generation
        # and 3.4 GiB shared, instead of 6.8 GiB a generation). Launches of one runtime run in stream order.
        self.share_workspace = share_workspace
        self._workspaces: dict[tuple, tuple[torch.Tensor, dict]] = {}
        # Benchmarks: CUDA events around each persistent kernel (kernel_ms), so a user-facing time and its
        # kernels' time come from the same call.
        self.time_kernels = False
        self.last_launch: dict[str, CudaGroup] = {}
        self.device = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
        if self.device.type != "cuda":
            raise ValueError(f"hpmoe MoEFFN runs on a CUDA device, got device={self.device}")
        sms = torch.cuda.get_device_properties(self.device).multi_processor_count
        # HPMOE_BLOCKS: worker blocks per rank (default: one per SM), for ranks that share a GPU (MPS).
        blocks = os.environ.get("HPMOE_BLOCKS", "")
        if blocks:
            if not blocks.isdigit() or not 2 <= int(blocks) <= sms:
                raise ValueError(f"HPMOE_BLOCKS={blocks!r}: worker blocks per rank must be an integer in [2, {sms}]")
            sms = int(blocks)
        # A build whose workers are 2-block clusters (-DHPMOE_CLUSTER_WORKER=1) runs half as many workers, each
        # with twice the rows of the one-block tile per row tile (tile_m None: 128 rows per block).
        self.blocks_per_worker = blocks_per_worker()
        sms //= self.blocks_per_worker
        self.tile_m = tile_m if tile_m is not None else 128 * self.blocks_per_worker
        # Row pipelines: cube-queue blocks run each row tile's whole chain; 4 vector-queue blocks run entry
        # signals and their share of the puts and reductions; routing-dependent work is claimed at run time
        # (benchmarks/RESULTS.md: fastest of split, mixed and pipelines at EP 1, 2 and 4).
        self.num_aiv = num_aiv if num_aiv is not None else max(2, 4 // self.blocks_per_worker)
        self._aiv_given = num_aiv is not None
        self.num_aic = num_aic if num_aic is not None else sms - self.num_aiv
        self._configs: dict = {}
        self.id = next(_ids)
        _RUNTIMES[self.id] = self  # the custom ops name their runtime by this id
        self._free: dict[tuple[int, int], list[CudaGroup]] = {}
        self._all: dict[tuple[int, int], list[CudaGroup]] = {}
        # Host seconds spent making heap generations, by part (EP > 1: every collective also waits for the slowest
        # rank and this GPU's queue); bucket_stats' group_seconds is their sum.
        self.group_parts = dict.fromkeys(GROUP_PARTS, 0.0)

    # ---- shape buckets and heap generations --------------------------------------------------------
    def config(self, tokens: int, rows_per_src: int | None = None, transposed: bool = False):
        """The schedule of one shape bucket: `transposed` weights are read in nn.Linear's layout ([E, 2I, h]
        and [E, h, I], kConfigWeightsTransposed). A schedule `hpmoe tune --backend cuda` measured for this
        shape on this GPU is used when the cache has one."""
        key = (tokens, rows_per_src, transposed)
        if key not in self._configs:  # make_config validates every field: once per shape, not per call
            self._configs[key] = self._make_config(tokens, rows_per_src, transposed)
        return self._configs[key]

    def _make_config(self, tokens: int, rows_per_src: int | None, transposed: bool):
        cfg = make_config(None, {"ep": self.ep, "tokens": tokens, "hidden": self.hidden, "inter": self.inter,
                                 "experts_per_rank": self.experts, "topk": self.topk, "dtype": DTYPES[self.dtype],
                                 "tile_m": self.tile_m, "num_aic": self.num_aic, "num_aiv": self.num_aiv,
                                 "wgrad_tile": self.wgrad_tile or self._default_wgrad_tile(),
                                 "token_tile": self.token_tile, "weights_transposed": transposed,
                                 "wgrad_n_block": self._wgrad_n_block(tokens), "fuse_swiglu": self.fuse_swiglu,
                                 "expert_aligned": bool(self.expert_aligned),
                                 "capacity_factor": self.capacity_factor, "mixed_queues": True,
                                 "row_pipelines": True, "claim_pool": True})
        if self.expert_aligned is None and default_expert_aligned(cfg):
            cfg = cfg.replace(expert_aligned=True, recv_rows_per_src=0)  # C re-derived with room for pads
        if too_few_row_tiles(cfg):
            # Fewer row chains than cube blocks (few tokens, top-1/2, wide experts), or about as many, some
            # twice as long (a row tile holding two experts' rows: gmm_split.chain_waves): mixed queues with
            # the claim pool, whose GMM ops the compiler splits into column blocks (gmm_split.py); one chain
            # per block would leave the rest idle. The SwiGLU steps then run on the vector-queue blocks: 20 of
            # them, not 4 (one H200, fwd+bwd kernels: Mixtral-8x7B experts at 4096 tokens 24.7 ms with
            # 112 + 20 blocks against 40.1 with 128 + 4, 27.8 with 96 + 36; DeepSeek-V3 at 1024 tokens 5.5
            # against 11.0 ms; benchmarks/RESULTS.md).
            # SwiGLU and its gradient run in whole rows (act_split.py; in the GMM's column blocks before session
            # 18, when this split was measured). With the first GMM pooled (the default here) those steps are pool
            # units every block claims, and the split measured within the spread: fwd+bwd kernels 112 + 20 /
            # 128 + 4, Mixtral-8x22B 29.49 / 30.35 ms, DBRX 38.28 / 37.00, Mixtral-8x7B 17.00 / 17.36, gpt-oss-20b
            # 6.90 / 6.89 (RESULTS.md, session 12).
            # Fused SwiGLU leaves the vector-queue blocks only puts and reductions: the default 4 (Mixtral-8x7B,
            # fused bound above: 16.3-16.5 ms with 128 + 4 blocks against 17.2-17.7 with 112 + 20).
            many = 20 // self.blocks_per_worker if not self.fuse_swiglu else self.num_aiv
            aiv = self.num_aiv if self._aiv_given else min(many, self.num_aic + self.num_aiv - 1)
            cfg = cfg.replace(row_pipelines=False, num_aic=self.num_aic + self.num_aiv - aiv, num_aiv=aiv)
            pooled = default_first_gmm_pool(cfg) if self.first_gmm_pool is None else self.first_gmm_pool
            cfg = cfg.replace(first_gmm_pool=pooled)
        if not self.token_tile:  # one reduction task per worker block (token_split.py)
            cfg = cfg.replace(token_tile=auto_token_tile(tokens, cfg.num_aic + cfg.num_aiv, cfg.tile_m))
        cfg = self._tuned(cfg)
        if (self.ep == 1 and not self.speculative) or self.sync_free:  # a bucket for any routing: nothing to agree on
            rows_per_src = round_up(cfg.max_rows_per_pair, cfg.tile_m)
        if rows_per_src is not None:
            cfg = cfg.replace(recv_rows_per_src=max(rows_per_src, cfg.tile_m if self.ep > 1 else 0))
        return cfg

    def _tuned(self, cfg):
        """The cached measured schedule for this shape and GPU (tuning_cache), if any and if it fits."""
        from ..tuning_cache import lookup, shape_key
        fields = lookup(shape_key(cfg), torch.cuda.get_device_name(self.device))
        if not fields:
            return cfg
        fields.setdefault("first_gmm_pool", False)  # an entry from before the field measured the static deal
        try:
            return cfg.replace(**fields)
        except HpmoeError:  # a stale entry (another version's fields): the compiler's choice stands
            return cfg

    def _wgrad_n_block(self, tokens: int) -> int:
        """Columns per weight-gradient unit: as given, else the measured rule at the expected rows per local
        expert (tokens x topk / local experts: every rank's tokens reach every rank's experts alike)."""
        if self.wgrad_n_block is not None:
            return self.wgrad_n_block
        return default_wgrad_n_block(self.hidden, self.inter, tokens * self.topk / self.experts)

    def _default_wgrad_tile(self) -> int:
        """128 output rows per weight-gradient tile (one GMM block tall) where it divides h and I: the claim
        pool then balances the backward's tail (DeepSeek-V3 experts, 8192 tokens, one H200: fwd+bwd kernels
        35.96 ms at 128 vs 38.76 ms at the compiler's 256 and 46.0 ms at 64; benchmarks/RESULTS.md)."""
        return 128 if self.hidden % 128 == 0 and self.inter % 128 == 0 else 0

    def _bucket(self, tokens: int, topk_ids: torch.Tensor, transposed: bool) -> int:
        """C for this call. Speculative: the shape's bucket as grown so far (no read of this call's routing).
        EP 1 (or sync_free): fixed. speculative=False at EP > 1: the largest rows any rank sends any rank,
        agreed by an all_reduce of device-computed counts (one host read per forward), rounded up to tile_m;
        a bucket once made is kept until the routing outgrows it, then the next is the ladder's step (ladder_rows)
        at least 1.25x larger."""
        cfg = self.config(tokens, None, transposed)
        if self.speculative:
            self._read_needs()
            return self._rows.setdefault((tokens, transposed), first_rows(cfg))
        if self.ep == 1 or self.sync_free:
            return cfg.recv_rows_per_src
        sent = torch.bincount(topk_ids.reshape(-1).long().clamp_(0, self.ep * self.experts - 1),
                              minlength=self.ep * self.experts)
        if cfg.expert_aligned:  # each expert's rows rounded up to whole row tiles (routing_plan.h)
            sent = round_up(sent, cfg.tile_m)
        sent = sent.reshape(self.ep, self.experts).sum(dim=1)
        need = torch.stack([sent.max(), torch.tensor(tokens, device=sent.device),
                            torch.tensor(-tokens, device=sent.device)])
        dist.all_reduce(need, op=dist.ReduceOp.MAX, group=self.group)
        rows, t_max, t_min = (int(v) for v in need.tolist())
        if t_max != -t_min:
            raise ValueError("every rank of the EP group must pass the same number of tokens")
        rows = round_up(rows, cfg.tile_m)
        made = [c for (t, c, w) in self._all if t == tokens and w == transposed]
        if any(c >= rows for c in made):
            return min(c for c in made if c >= rows)
        return ladder_rows(cfg, rows, int(max(made) * GROWTH) if made else 0)  # layers of a shape share steps

    # ---- the speculative bucket (ep > 1) ------------------------------------------------------------
    def passes(self, key: tuple) -> list[tuple[int, int]]:
        """Token ranges [begin, end) of the passes an overflowed forward of bucket `key` runs."""
        return pass_ranges(self.config(*key), key[1])

    def need_slot(self) -> int:
        """Numbers this speculative forward and returns the mapped host address its launch writes the agreed
        need to; call note_forward after enqueuing it. A forward captured into a CUDA graph writes word 0,
        which no eager forward's read uses (its replays write it again)."""
        if self._needs is None:
            self._needs = torch.zeros(_NEED_RING, dtype=torch.int32, pin_memory=True)
        if torch.cuda.is_current_stream_capturing():
            return self._needs.data_ptr()
        self._forwards += 1
        return self._needs.data_ptr() + 4 * self._need_word(self._forwards)

    @staticmethod
    def _need_word(forward: int) -> int:
        return 1 + forward % (_NEED_RING - 1)

    def note_forward(self, key: tuple) -> None:
        if torch.cuda.is_current_stream_capturing():  # a graph replays its launches without this host code
            return
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(self.device))
        self._unread[self._forwards] = (event, key[:1] + key[2:], key[1])

    def _read_needs(self) -> None:
        """Reads the agreed need of the forward `overflow_lag` forwards back (waiting for it only if the GPU is
        that far behind) and grows its shape's bucket if it overflowed: at least 1.25x, as the reference
        heap manager grows. Every rank reads the same forward at the same call, so they grow together."""
        if torch.cuda.is_current_stream_capturing():
            return
        for n in [n for n in self._unread if n <= self._forwards - self.overflow_lag + 1]:
            event, (tokens, transposed), C = self._unread.pop(n)
            if not event.query():
                self.overflow_waits += 1
                event.synchronize()
            need = int(self._needs[self._need_word(n)])
            self.overflows_seen += need > C
            now = self._rows.get((tokens, transposed), C)  # an earlier read may have grown it past `need`
            self._rows[(tokens, transposed)] = grown_rows(self.config(tokens, None, transposed), now, need)

    def lease(self, tokens: int, topk_ids: torch.Tensor, transposed: bool = False) -> _Lease:
        key = (tokens, self._bucket(tokens, topk_ids, transposed), transposed)
        free = self._free.setdefault(key, [])
        if not free:
            free.append(self._new_group(self.config(*key), self._placed(key)))
            self._all.setdefault(key, []).append(free[-1])
        return _Lease(free, free.pop(), key)

    def _placed(self, key: tuple) -> dict:
        """Device addresses of the workspace slots that the generations of bucket `key` share."""
        if not self.share_workspace:
            return {}
        if key not in self._workspaces:
            plan = plan_workspace(self.config(*key))
            buf = torch.zeros(max(plan.nbytes, 1), dtype=torch.uint8, device=self.device)  # as heaps start
            self._workspaces[key] = (buf, {s: buf.data_ptr() + o for s, o in plan.offsets.items()})
        return self._workspaces[key][1]

    def _new_group(self, cfg, placed: dict) -> CudaGroup:
        clock = _PartClock(self.group_parts)
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        schedules, mine = _compiled(cfg, self.rank)
        clock.lap("compile")
        if self.ep == 1:
            g = CudaGroup(cfg, [index], schedules, external=EXTERNAL_SLOTS, placed=placed)
            clock.lap("heap")
        else:
            # Every rank's files, as each rank compiled its own, for the loader's group check (every generation:
            # a collective that every rank of the group makes at the same call, whatever its cache holds).
            files: list = [None] * self.ep
            dist.all_gather_object(files, mine, group=self.group)
            peer_ssc = {d: [f[d] for f in files] for d in ("fwd", "bwd")}
            clock.lap("files")

            def exchange(handle: bytes) -> list[bytes]:
                clock.lap("heap")  # the heap allocated and zeroed, its IPC handle made
                handles = self._exchange(handle)
                clock.lap("handles")
                return handles

            g = CudaGroup(cfg, [index], schedules, local_rank=self.rank, exchange=exchange,
                          external=EXTERNAL_SLOTS, placed=placed, peer_ssc=peer_ssc, own_ssc=mine)
            clock.lap("mapping")  # peers' heaps opened, the SSCs loaded and checked
            dist.barrier(group=self.group)  # every heap mapped before any rank launches
            clock.lap("barrier")
        return g

    def _exchange(self, handle: bytes) -> list[bytes]:
        handles: list = [None] * self.ep
        dist.all_gather_object(handles, handle, group=self.group)
        return handles

    def bucket_stats(self) -> dict:
        """What the receive buckets did so far: the buckets made (rows per source C, for a token count and weight
        layout; several for one token count and layout mean the routing outgrew the first), the forwards read as
        overflowed (each ran as passes), the reads that waited for the GPU, and the host seconds spent making heap
        generations (each bucket's `generations`) and where they went (`group_parts`, GROUP_PARTS). Host counters
        only: no sync."""
        return {"buckets": [{"tokens": t, "rows": c, "transposed": w, "generations": len(self._all[(t, c, w)])}
                            for (t, c, w) in sorted(self._all)],
                "overflows_seen": self.overflows_seen, "overflow_waits": self.overflow_waits,
                "group_seconds": sum(self.group_parts.values()), "group_parts": dict(self.group_parts)}

    def heap_bytes(self) -> int:
        """Device memory of this rank's heap generations created so far and of their shared workspaces."""
        return self.generation_bytes() + self.workspace_bytes()

    def generation_bytes(self) -> int:
        """The heap generations alone (one per forward in flight)."""
        return sum(g.segment_bytes() for groups in self._all.values() for g in groups)

    def workspace_bytes(self) -> int:
        return sum(buf.numel() for buf, _ in self._workspaces.values())

    def poll(self) -> None:
        """Raises the one-line report of a failed launch (reads mapped host memory: no sync unless one
        failed); the failed generation is dropped so the next call starts on a fresh heap."""
        for key, groups in self._all.items():
            for g in list(groups):
                try:
                    g.poll()
                except CudaFailure:
                    groups.remove(g)
                    if g in self._free.get(key, []):
                        self._free[key].remove(g)
                    raise

    def call_mark(self):
        """`timed=` of a call's first launch (time_kernels): a speculative call is timed from it to its last pass
        (passes run only if it overflowed; pass_mark), others around it alone."""
        return ("start" if self.speculative else True) if self.time_kernels else False

    def pass_mark(self, index: int, passes: int):
        """`timed=` of pass `index` of `passes`: the last one ends a speculative call's timing."""
        return "end" if self.time_kernels and index == passes - 1 else False

    def kernel_ms(self) -> dict[str, float]:
        """The persistent kernels' ms of the last fwd and bwd launch (time_kernels must have been on; waits)."""
        return {d: g.kernel_ms(self.rank, d) for d, g in self.last_launch.items()}

    def check(self) -> None:
        """Waits for this device's work, then raises any failure (for tests and debugging)."""
        torch.cuda.synchronize(self.device)
        self.poll()


