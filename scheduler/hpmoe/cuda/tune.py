"""`hpmoe tune --backend cuda`: measure candidate schedules on the GPU, cache the fastest per shape and GPU.

Mercury-style: every candidate is compiled and run for real (fwd + bwd kernel time, median of a few
launches after one warm-up pair), never predicted. Coordinate search, as the A3 tuner (sim/tune.py): start
from the given config, try each value of one dimension with the others fixed, keep the best, repeat until a
round changes nothing. Dimensions: the queue variant, the cube/vector worker split (same block total), the
row tile, the GMM column block (gmm_split.py; 0 = the compiler's rule; the variant "mixed+pool+gmm1" claims
the first GMM from the pool too, worker_queues._first_stage), the weight-gradient column block
(wgrad_split.py; 0 = whole widths, MoEFFN's default splits) and SwiGLU's column block (act_split.py: 0 = whole
rows, "gmm" = the candidate's GMM column block, so that SwiGLU tasks can start before a row's last GMM1
block). A candidate the compiler or the
backend refuses is skipped with its reason. The winner goes to tuning_cache.py, keyed by shape and GPU name.
The search takes any `runner(cfg) -> ms`, so tests drive it without a GPU.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
import subprocess
import time
from typing import Callable

from ..config import MoeConfig
from ..coordinate_search import coordinate_descent
from ..errors import ConfigError, HpmoeError
from ..gmm_split import GMM_TILE_N, gmm_widths, n_block, whole_width_block
from ..tuning_cache import shape_key

VARIANTS = {"mixed": dict(mixed_queues=True, row_pipelines=False, claim_pool=False, first_gmm_pool=False),
            "mixed+pool": dict(mixed_queues=True, row_pipelines=False, claim_pool=True, first_gmm_pool=False),
            "mixed+pool+gmm1": dict(mixed_queues=True, row_pipelines=False, claim_pool=True, first_gmm_pool=True),
            "pipelines+pool": dict(mixed_queues=True, row_pipelines=True, claim_pool=True, first_gmm_pool=False)}
VECTOR_BLOCKS = (20, 12, 4)  # vector-queue blocks tried; cube blocks = the config's total minus these
TILE_M = (128, 256)          # 64-row tiles ran 1.45x slower (docs/cuda.md): the tile is built for 128 rows
WGRAD_N_BLOCKS = (1024, 2048)  # besides 0 (whole widths): the blocks MoEFFN's rule picks (wgrad_split.py)
ACT_N_BLOCKS = (0, "gmm")    # whole rows, or the GMM column block in force (act_block_of)


@dataclasses.dataclass
class Trial:
    params: dict
    ms: float = math.inf
    skipped: str = ""


@dataclasses.dataclass
class CudaTuneResult:
    start: Trial
    best: Trial
    best_cfg: MoeConfig
    tried: list[Trial]


def search_space(cfg: MoeConfig) -> dict[str, tuple]:
    total = cfg.num_aic + cfg.num_aiv
    workers = tuple(f"{total - v}+{v}" for v in VECTOR_BLOCKS if total - v >= 1)
    blocks = [0, whole_width_block(cfg)]
    blocks += [b for b in (256, 512, 1024, 2048, 4096) if b < max(gmm_widths(cfg)) and b % GMM_TILE_N == 0]
    wgrad = (0,) + tuple(b for b in WGRAD_N_BLOCKS if b < max(cfg.hidden, 2 * cfg.inter))
    return {"variant": tuple(VARIANTS), "workers": workers, "tile_m": TILE_M, "gmm_n_block": tuple(blocks),
            "wgrad_n_block": wgrad, "act_n_block": ACT_N_BLOCKS}


def act_block_of(cfg: MoeConfig, value: int | str) -> int:
    """act_n_block for a candidate: an integer as given; "gmm", the GMM column block in force (a multiple of
    wgrad_tile too with weights_transposed, act_split.check_block). ConfigError (the candidate is skipped) when
    no GMM split is in force: "gmm" would be whole rows, a candidate already tried."""
    if value != "gmm":
        return int(value)
    block = n_block(cfg)
    if not 0 < block < cfg.inter:
        raise ConfigError("act_n_block=gmm: no GMM column split in force, the same as whole rows")
    return math.lcm(block, cfg.wgrad_tile) if cfg.weights_transposed else block


def candidate_config(cfg: MoeConfig, params: dict) -> MoeConfig:
    """cfg with a candidate's parameters; the bucket is re-derived (tile_m changes its rounding)."""
    aic, _, aiv = params["workers"].partition("+")
    c = cfg.replace(**VARIANTS[params["variant"]], num_aic=int(aic), num_aiv=int(aiv), tile_m=params["tile_m"],
                    gmm_n_block=params["gmm_n_block"], wgrad_n_block=params.get("wgrad_n_block", 0),
                    act_n_block=0, recv_rows_per_src=0, token_tile=0)
    act = act_block_of(c, params.get("act_n_block", 0))
    return c.replace(act_n_block=act) if act else c


def start_params(cfg: MoeConfig) -> dict:
    variant = next((name for name, flags in VARIANTS.items()
                    if all(getattr(cfg, k) == v for k, v in flags.items())), "mixed+pool+gmm1")
    return {"variant": variant, "workers": f"{cfg.num_aic}+{cfg.num_aiv}", "tile_m": cfg.tile_m,
            "gmm_n_block": cfg.gmm_n_block, "wgrad_n_block": cfg.wgrad_n_block, "act_n_block": cfg.act_n_block}


def tune_cuda(cfg: MoeConfig, runner: Callable[[MoeConfig], float], *, rounds: int = 2,
              space: dict[str, tuple] | None = None, log: Callable[[str], None] | None = None) -> CudaTuneResult:
    space = space or search_space(cfg)
    seen: dict[tuple, tuple[Trial, MoeConfig | None]] = {}

    def evaluate(params: dict) -> Trial:
        key = tuple(sorted(params.items()))
        if key not in seen:
            trial, c = Trial(dict(params)), None
            try:
                c = candidate_config(cfg, params)
                trial.ms = float(runner(c))
            except HpmoeError as exc:  # ConfigError, ScheduleError, CudaFailure: a refused candidate
                trial.skipped = str(exc)
            seen[key] = (trial, c)
            if log:
                state = trial.skipped or f"fwd+bwd {trial.ms:.3f} ms"
                log(f"  {' '.join(f'{k}={v}' for k, v in params.items())}: {state}")
        return seen[key][0]

    start = evaluate(start_params(cfg))
    if start.skipped:
        raise HpmoeError(f"the starting schedule does not run: {start.skipped}")
    # A gain inside timing noise (0.5%) is no gain.
    best = coordinate_descent(start, space, evaluate, lambda t, b: t.ms < b.ms * 0.995, rounds)
    best_cfg = seen[tuple(sorted(best.params.items()))][1]
    return CudaTuneResult(start, best, best_cfg, [t for t, _ in seen.values()])


class GpuMeasurer:
    """`runner(cfg) -> ms` for tune_cuda: median fwd + bwd kernel milliseconds (slowest rank) of a candidate on
    this process's GPUs, after `warm_s` seconds of untimed launches. The routing and the inputs (in storage
    form, the config's weight layout) are drawn once for the whole search: they do not depend on the schedule,
    and drawing Mixtral-8x7B's 1.4 G weights in float64 per candidate had taken about two minutes of every
    trial."""

    def __init__(self, cfg: MoeConfig, devices: list[int], *, iterations: int = 5, routing: str = "random",
                 seed: int = 0, timeout_s: float = 60.0, warm_s: float = 0.0):
        import numpy as np

        from ..runtime.dtypes import to_storage
        from ..runtime.routing import make_routing
        from ..runtime.twin import draw_inputs
        from ..weight_layout import stored

        self.devices, self.iterations, self.timeout_s, self.warm_s = devices, iterations, timeout_s, warm_s
        self.ids, self.weights = make_routing(cfg, routing, seed)

        def draw(rng, shape, scale):  # float32 straight to storage: no float64 copy of the weights
            return to_storage(rng.standard_normal(shape, dtype=np.float32) * np.float32(scale), cfg.dtype)

        x, w1, w2, dy = draw_inputs(cfg, seed, draw)
        wt = cfg.weights_transposed
        self.inputs = [(x[r], stored(w1[r], wt), stored(w2[r], wt), dy[r]) for r in range(cfg.ep)]
        self.shape = shape_key(cfg)

    def __call__(self, cfg: MoeConfig) -> float:
        from ..runtime.routing import bucket_for, check_routing
        from .group import CudaGroup

        if shape_key(cfg) != self.shape:
            raise ValueError("GpuMeasurer: a candidate of another shape than the inputs were drawn for")
        cfg = cfg.replace(recv_rows_per_src=bucket_for(cfg, self.ids))
        check_routing(cfg, self.ids, self.weights)
        with CudaGroup(cfg, self.devices) as group:
            for r, (x, w1, w2, dy) in enumerate(self.inputs):
                group.load_rank(r, x, w1, w2, dy, self.ids[r], self.weights[r])
            # Untimed launches first, at least one pair: under a power cap (an H200's 700 W, reached within a
            # second of steps) the clock a candidate gets depends on the power it draws, and a training loop
            # runs it at that clock, not at the boost clock of a cold GPU (docs/cuda.md, the power cap).
            start = time.perf_counter()
            while True:
                group.run("fwd", timeout_s=self.timeout_s)
                group.run("bwd", timeout_s=self.timeout_s)
                if time.perf_counter() - start >= self.warm_s:
                    break
            times = [max(group.run("fwd", timeout_s=self.timeout_s)) + max(group.run("bwd", timeout_s=self.timeout_s))
                     for _ in range(self.iterations)]
        return statistics.median(times)


def measure_on_gpu(cfg: MoeConfig, devices: list[int], *, iterations: int = 5, routing: str = "random",
                   seed: int = 0, timeout_s: float = 60.0, warm_s: float = 0.0) -> float:
    """One candidate measured alone (GpuMeasurer draws its inputs for each call)."""
    return GpuMeasurer(cfg, devices, iterations=iterations, routing=routing, seed=seed, timeout_s=timeout_s,
                       warm_s=warm_s)(cfg)


def gpu_name(device: int) -> str:
    """The GPU's name as the driver reports it (the cache key), through nvidia-smi."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", str(device)],
                             capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise HpmoeError(f"cannot read the name of GPU {device} for the tuning cache: {exc}") from None
    if not out:
        raise HpmoeError(f"nvidia-smi printed no name for GPU {device}")
    return out.splitlines()[0]
