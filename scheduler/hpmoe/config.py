"""MoE-FFN compile configuration: presets, overrides, validation and derived sizes.

A config names one shape bucket: tokens per rank (T) and rows a rank can receive from each source rank (C).
An SSC compiled for a bucket serves any routing inside it; see docs/design.md, "Routing and buckets".
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from .args import INT32_MAX, ValueCheckError, check_bool, check_choice, check_float, check_int, read_json
from .act_split import check_block
from .errors import ConfigError
from .ssc_format import (CONFIG_CLAIM_POOL, CONFIG_EXPERT_ALIGNED, CONFIG_FUSED_SWIGLU, CONFIG_INTERLEAVE,
                         CONFIG_MIXED_QUEUES, CONFIG_RATR, CONFIG_ROW_PIPELINES, CONFIG_WEIGHTS_TRANSPOSED,
                         FUSED_SWIGLU_GROUP, DType)

DTYPE_NAMES = {"fp32": DType.FP32, "fp16": DType.FP16, "bf16": DType.BF16}


@dataclasses.dataclass(frozen=True)
class MoeConfig:
    ep: int
    tokens: int
    hidden: int
    inter: int
    experts_per_rank: int
    topk: int
    dtype: str = "bf16"
    tile_m: int = 128
    recv_rows_per_src: int = 0  # 0 = derive from capacity_factor
    capacity_factor: float = 1.25
    wgrad_tile: int = 0  # 0 = largest divisor of gcd(hidden, inter) that is <= 256
    token_tile: int = 0  # 0 = tile_m
    num_aic: int = 25
    num_aiv: int = 50
    ratr: bool = True
    interleave: bool = True
    mixed_queues: bool = False  # dispatch puts and final reductions on every worker (CPU twin, CUDA; not Ascend)
    row_pipelines: bool = False  # each row tile's chain on one cube-queue worker (needs mixed_queues)
    claim_pool: bool = False  # routing-dependent work claimed at run time (pool_claimers; CPU twin, CUDA)
    weights_transposed: bool = False  # W1 [E, 2I, h], W2 [E, h, I] as nn.Linear stores them (CPU twin, CUDA)
    fuse_swiglu: bool = False  # SwiGLU and its gradient in the GMM tiles' epilogues (graphs.py; needs mixed_queues)
    expert_aligned: bool = False  # each local expert's rows start on a tile_m boundary (CPU twin, CUDA)
    gmm_n_block: int = 0  # output columns per GMM task (0: the compiler's choice, gmm_split.py); not in the SSC
    act_n_block: int = 0  # columns of A per SwiGLU / SwiGLU-grad task (0: whole rows, act_split.py)
    wgrad_n_block: int = 0  # output columns per weight-gradient task, claim pool only (0: whole); not in the SSC
    # The first GMM of each direction and its SwiGLU step in the claim pool too, in panel order (mixed queues
    # and claim pool, no row pipelines; worker_queues._first_stage); not in the SSC.
    first_gmm_pool: bool = False

    # ---- derived ------------------------------------------------------------------------------
    @property
    def num_experts(self) -> int:
        return self.ep * self.experts_per_rank

    @property
    def chunks_per_src(self) -> int:
        """NC: row tiles in each source's receive slot."""
        return self.recv_rows_per_src // self.tile_m

    @property
    def recv_rows(self) -> int:
        """Rows of every receive buffer: ep slots of C rows."""
        return self.ep * self.recv_rows_per_src

    @property
    def row_tiles(self) -> int:
        return self.ep * self.chunks_per_src

    @property
    def token_tiles(self) -> int:
        return math.ceil(self.tokens / self.token_tile)

    @property
    def dtype_enum(self) -> DType:
        return DTYPE_NAMES[self.dtype]

    @property
    def flags(self) -> int:
        return ((CONFIG_RATR if self.ratr else 0) | (CONFIG_INTERLEAVE if self.interleave else 0) |
                (CONFIG_MIXED_QUEUES if self.mixed_queues else 0) | (CONFIG_ROW_PIPELINES if self.row_pipelines else 0) |
                (CONFIG_CLAIM_POOL if self.claim_pool else 0) |
                (CONFIG_WEIGHTS_TRANSPOSED if self.weights_transposed else 0) |
                (CONFIG_FUSED_SWIGLU if self.fuse_swiglu else 0) |
                (CONFIG_EXPERT_ALIGNED if self.expert_aligned else 0))

    @property
    def align_rows(self) -> int:
        """A local expert's first row in its receive slot is a multiple of this: tile_m with expert_aligned
        (every row tile then holds one expert's rows), else 1."""
        return self.tile_m if self.expert_aligned else 1

    @property
    def pool_claimers(self) -> int:
        """Workers that claim pool units after their own queue (queues 0..n-1): the cube-queue ones, and with
        mixed queues but no row pipelines (every worker runs every handler) all of them. Row pipelines keep
        their few vector-queue workers out: claiming there measured 0.2-0.5 ms slower in six of six
        alternating DeepSeek-V3 8192-token runs on one H200. The C++ loader derives the same."""
        return self.num_aic + self.num_aiv if self.mixed_queues and not self.row_pipelines else self.num_aic

    @property
    def max_rows_per_pair(self) -> int:
        """Most rows one source can send one rank (rows_per_pair of all its tokens)."""
        return self.rows_per_pair(self.tokens)

    def rows_per_pair(self, tokens: int, distinct: bool = True) -> int:
        """Most rows `tokens` tokens of one source can send one rank: every token picks min(k, E_local)
        experts there (k rows if a token's ids may repeat: `distinct=False`); with expert_aligned, the pads
        too: each expert that gets rows rounds them up to tile_m (at most E_local experts, each at most
        `tokens` rows when ids are distinct)."""
        rows = tokens * (min(self.topk, self.experts_per_rank) if distinct else self.topk)
        if not self.expert_aligned:
            return rows
        padded = rows + min(self.experts_per_rank, rows) * (self.tile_m - 1)
        return min(padded, self.experts_per_rank * round_up(tokens, self.tile_m)) if distinct else padded

    def ssc_fields(self) -> dict[str, int]:
        """The values stored in the SSC's config record, in header field order."""
        return {
            "ep": self.ep, "tokens": self.tokens, "hidden": self.hidden, "inter": self.inter,
            "experts_per_rank": self.experts_per_rank, "topk": self.topk, "dtype": int(self.dtype_enum),
            "tile_m": self.tile_m, "recv_rows_per_src": self.recv_rows_per_src,
            "wgrad_tile": self.wgrad_tile, "token_tile": self.token_tile, "num_aic": self.num_aic,
            "num_aiv": self.num_aiv, "flags": self.flags,
        }

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> "MoeConfig":
        return resolve(dataclasses.replace(self, **changes))


PRESETS: dict[str, dict[str, Any]] = {
    # DeepSeek-V3 MoE-FFN as in the paper's evaluation: 8 local experts, top-8, 4096 x 2 tokens per rank.
    "deepseek-v3": dict(ep=16, tokens=8192, hidden=7168, inter=2048, experts_per_rank=8, topk=8,
                        dtype="bf16", tile_m=256, wgrad_tile=256, token_tile=256, num_aic=25, num_aiv=50),
    # Small enough for the CPU twin and the tests; odd sizes exercise non-power-of-two paths elsewhere.
    "small": dict(ep=4, tokens=64, hidden=64, inter=32, experts_per_rank=2, topk=2, dtype="fp32",
                  tile_m=16, wgrad_tile=16, token_tile=16, num_aic=2, num_aiv=4),
}

FIELD_NAMES = {f.name for f in dataclasses.fields(MoeConfig)}


def round_up(value: int, multiple: int) -> int:
    """The smallest multiple of `multiple` that is at least `value` (elementwise for integer numpy arrays and
    torch tensors too)."""
    return -(-value // multiple) * multiple


def _default_wgrad_tile(hidden: int, inter: int) -> int:
    g = math.gcd(hidden, inter)
    return max(d for d in range(1, min(g, 256) + 1) if g % d == 0)


# Per-field rules: (smallest, largest). Workers: no device has more than 1024 of a kind, and the CPU twin
# starts one thread per worker, so a larger count is a typo, not a machine.
MAX_WORKERS = 1024
INT_FIELDS = {"ep": (1, INT32_MAX), "tokens": (1, INT32_MAX), "hidden": (1, INT32_MAX), "inter": (1, INT32_MAX),
              "experts_per_rank": (1, INT32_MAX), "topk": (1, INT32_MAX), "tile_m": (1, INT32_MAX),
              "recv_rows_per_src": (0, INT32_MAX), "wgrad_tile": (0, INT32_MAX), "token_tile": (0, INT32_MAX),
              "num_aic": (1, MAX_WORKERS), "num_aiv": (1, MAX_WORKERS), "gmm_n_block": (0, INT32_MAX),
              "act_n_block": (0, INT32_MAX), "wgrad_n_block": (0, INT32_MAX)}


def _check_fields(cfg: MoeConfig) -> None:
    """Types and ranges of every field, before any arithmetic on them."""
    try:
        for name, (lo, hi) in INT_FIELDS.items():
            check_int(name, getattr(cfg, name), lo, hi)
        check_choice("dtype", cfg.dtype, DTYPE_NAMES)
        check_float("capacity_factor", cfg.capacity_factor, 0.0, lo_open=True)
        check_bool("ratr", cfg.ratr)
        check_bool("interleave", cfg.interleave)
        check_bool("mixed_queues", cfg.mixed_queues)
        check_bool("row_pipelines", cfg.row_pipelines)
        check_bool("claim_pool", cfg.claim_pool)
        check_bool("weights_transposed", cfg.weights_transposed)
        check_bool("fuse_swiglu", cfg.fuse_swiglu)
        check_bool("expert_aligned", cfg.expert_aligned)
        check_bool("first_gmm_pool", cfg.first_gmm_pool)
    except ValueCheckError as exc:
        raise ConfigError(str(exc)) from None


def resolve(cfg: MoeConfig) -> MoeConfig:
    """Validate every field and fill the derived defaults; raises ConfigError naming the first problem."""
    _check_fields(cfg)
    if cfg.row_pipelines and not cfg.mixed_queues:
        raise ConfigError("row_pipelines needs mixed_queues: its cube workers run the chains' vector tasks")
    if cfg.fuse_swiglu and not cfg.mixed_queues:
        raise ConfigError("fuse_swiglu needs mixed_queues: only the CPU twin and CUDA run fused SwiGLU tiles")
    if cfg.fuse_swiglu and cfg.inter % FUSED_SWIGLU_GROUP:
        raise ConfigError(f"fuse_swiglu needs inter={cfg.inter} to be a multiple of {FUSED_SWIGLU_GROUP} "
                          f"(H interleaves gate and up in groups of {FUSED_SWIGLU_GROUP} columns)")
    if cfg.fuse_swiglu and cfg.act_n_block % FUSED_SWIGLU_GROUP:
        raise ConfigError(f"act_n_block={cfg.act_n_block} is not a multiple of {FUSED_SWIGLU_GROUP}: a fused task "
                          f"covers whole groups of H's interleaved columns")
    if cfg.first_gmm_pool and not (cfg.mixed_queues and cfg.claim_pool and not cfg.row_pipelines):
        raise ConfigError("first_gmm_pool needs mixed_queues and claim_pool without row_pipelines: every worker "
                          "claims the first GMM's units")
    if cfg.topk > cfg.num_experts:
        raise ConfigError(f"topk={cfg.topk} is larger than the number of experts "
                          f"ep*experts_per_rank={cfg.num_experts}")
    if cfg.gmm_n_block % 8:  # a column block starts on a 16-byte boundary of a 16-bit row (GPU vector stores)
        raise ConfigError(f"gmm_n_block={cfg.gmm_n_block} is not a multiple of 8")
    if cfg.act_n_block % 8:  # the same, for A's and H's column blocks
        raise ConfigError(f"act_n_block={cfg.act_n_block} is not a multiple of 8")
    if cfg.wgrad_n_block % 8:  # the same, for dW's column blocks
        raise ConfigError(f"wgrad_n_block={cfg.wgrad_n_block} is not a multiple of 8")
    changes: dict[str, Any] = {}
    wgrad = cfg.wgrad_tile or _default_wgrad_tile(cfg.hidden, cfg.inter)
    for dim_name in ("hidden", "inter"):
        if getattr(cfg, dim_name) % wgrad:
            raise ConfigError(f"{dim_name}={getattr(cfg, dim_name)} is not divisible by wgrad_tile={wgrad}")
    changes["wgrad_tile"] = wgrad
    token_tile = cfg.token_tile or cfg.tile_m
    changes["token_tile"] = token_tile
    cap_limit = round_up(cfg.max_rows_per_pair, cfg.tile_m)
    if cfg.recv_rows_per_src:
        if cfg.recv_rows_per_src % cfg.tile_m:
            raise ConfigError(f"recv_rows_per_src={cfg.recv_rows_per_src} is not divisible by "
                              f"tile_m={cfg.tile_m}")
        capacity = cfg.recv_rows_per_src
    else:
        wanted = cfg.tokens * cfg.topk / cfg.ep * cfg.capacity_factor  # a float: compare before ceil
        if cfg.expert_aligned:  # room for the most pads: capacity_factor then means what it means without
            wanted += cfg.experts_per_rank * (cfg.tile_m - 1)
        capacity = cap_limit if wanted >= cap_limit else \
            min(cap_limit, round_up(max(1, math.ceil(wanted)), cfg.tile_m))
    changes["recv_rows_per_src"] = capacity
    if capacity * cfg.ep >= 2**31:
        raise ConfigError(f"buffers of {capacity * cfg.ep} rows exceed the 32-bit row indices of the SSC")
    if cfg.tokens * cfg.topk >= 2**31:
        raise ConfigError(f"tokens*topk={cfg.tokens * cfg.topk} rows exceed the 32-bit row indices of the SSC")
    resolved = dataclasses.replace(cfg, **changes)
    check_block(resolved)
    return resolved


def make_config(preset: str | None = None, overrides: Mapping[str, Any] | None = None,
                json_path: str | None = None) -> MoeConfig:
    """Preset, then JSON file, then explicit overrides (None values are ignored)."""
    fields: dict[str, Any] = {}
    if preset is not None:
        if preset not in PRESETS:
            raise ConfigError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
        fields.update(PRESETS[preset])
    if json_path is not None:
        try:
            loaded = read_json(json_path, "config")
        except ValueCheckError as exc:
            raise ConfigError(str(exc)) from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config {json_path} must hold a JSON object")
        fields.update(loaded)
    fields.update({k: v for k, v in (overrides or {}).items() if v is not None})
    unknown = sorted(set(fields) - FIELD_NAMES)
    if unknown:
        raise ConfigError(f"unknown config field(s): {', '.join(unknown)}")
    missing = sorted(n for n in ("ep", "tokens", "hidden", "inter", "experts_per_rank", "topk") if n not in fields)
    if missing:
        raise ConfigError(f"missing config field(s): {', '.join(missing)} (give --preset or set them)")
    return resolve(MoeConfig(**fields))


def config_from_ssc_fields(fields: Mapping[str, int]) -> MoeConfig:
    """Rebuild a MoeConfig from an SSC's config record."""
    dtype = {v: k for k, v in DTYPE_NAMES.items()}.get(DType(fields["dtype"]))
    flags = int(fields["flags"])
    kwargs = {n: int(fields[n]) for n in ("ep", "tokens", "hidden", "inter", "experts_per_rank", "topk", "tile_m",
                                           "recv_rows_per_src", "wgrad_tile", "token_tile", "num_aic", "num_aiv")}
    return resolve(MoeConfig(dtype=dtype, ratr=bool(flags & CONFIG_RATR),
                             interleave=bool(flags & CONFIG_INTERLEAVE),
                             mixed_queues=bool(flags & CONFIG_MIXED_QUEUES),
                             row_pipelines=bool(flags & CONFIG_ROW_PIPELINES),
                             claim_pool=bool(flags & CONFIG_CLAIM_POOL),
                             weights_transposed=bool(flags & CONFIG_WEIGHTS_TRANSPOSED),
                             fuse_swiglu=bool(flags & CONFIG_FUSED_SWIGLU),
                             expert_aligned=bool(flags & CONFIG_EXPERT_ALIGNED), **kwargs))
