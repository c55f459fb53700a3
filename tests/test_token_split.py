"""The reduction split for the GPU deals (token_split.py): one top-k reduction task per worker block, and the
schedules it makes pass both validators."""
from __future__ import annotations

import pytest

from hpmoe.config import make_config
from hpmoe.runtime import native
from hpmoe.ssc_format import TaskType
from hpmoe.ssc_io import to_bytes
from hpmoe.token_split import auto_token_tile
from hpmoe.validate import validate
from schedule_tools import compile_group


@pytest.mark.parametrize("tokens, workers, tile_m, expected", [
    (1024, 132, 128, 8),     # DeepSeek-V3 experts at 1024 tokens: 128 tasks instead of 8
    (4096, 132, 128, 32),    # 128 tasks instead of 32
    (8192, 132, 128, 64),    # 128 tasks instead of 64
    (65536, 132, 128, 128),  # never more than tile_m (today's default)
    (100, 132, 128, 8),      # never fewer than 8 tokens
    (100, 132, 4, 4),        # ... unless tile_m is smaller
    (1000, 3, 128, 128),
])
def test_rule(tokens, workers, tile_m, expected):
    tile = auto_token_tile(tokens, workers, tile_m)
    assert tile == expected
    assert tile % 8 == 0 or tile == tile_m
    if tile < tile_m and tile > 8:  # the least multiple of 8 whose tasks fit the workers
        assert -(-tokens // tile) <= workers < -(-tokens // (tile - 8))


@pytest.mark.parametrize("tokens, workers", [(0, 132), (8, 0)])
def test_rule_refuses_empty_inputs(tokens, workers):
    with pytest.raises(ValueError, match="must be positive"):
        auto_token_tile(tokens, workers, 128)


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
@pytest.mark.parametrize("over", [dict(mixed_queues=True, claim_pool=True),
                                  dict(mixed_queues=True, row_pipelines=True, claim_pool=True)])
def test_small_token_tiles_pass_both_validators(direction, over):
    cfg = make_config("small", {"ep": 2, **over})
    cfg = cfg.replace(token_tile=auto_token_tile(cfg.tokens, cfg.num_aic + cfg.num_aiv, cfg.tile_m))
    schedules = compile_group(cfg, direction)
    assert validate(schedules, group=True) == []
    error, _ = native.validate_ssc([to_bytes(s) for s in schedules])
    assert not error, error
    kind = TaskType.COMBINE_REDUCE if direction == "fwd" else TaskType.TOPK_WEIGHT_GRAD
    assert int((schedules[0].tasks["task_type"] == int(kind)).sum()) == cfg.token_tiles
