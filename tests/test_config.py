"""Config presets, overrides and the one-line errors for bad configs."""
from __future__ import annotations

import json

import pytest

from hpmoe.config import PRESETS, make_config
from hpmoe.errors import ConfigError


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_presets_resolve(preset):
    cfg = make_config(preset)
    assert cfg.recv_rows_per_src % cfg.tile_m == 0
    assert cfg.hidden % cfg.wgrad_tile == 0 and cfg.inter % cfg.wgrad_tile == 0


def test_deepseek_v3_preset_matches_the_paper():
    cfg = make_config("deepseek-v3")
    assert (cfg.hidden, cfg.inter, cfg.experts_per_rank, cfg.topk, cfg.tokens, cfg.dtype) == \
        (7168, 2048, 8, 8, 8192, "bf16")
    assert (cfg.num_aic, cfg.num_aiv) == (25, 50)


def test_bucket_is_sized_by_balanced_load_not_worst_case():
    cfg = make_config("deepseek-v3", {"ep": 16})
    balanced = cfg.tokens * cfg.topk // cfg.ep            # 4096 rows per (source, destination)
    assert balanced <= cfg.recv_rows_per_src <= 2 * balanced
    assert cfg.recv_rows_per_src < cfg.max_rows_per_pair  # far below every token going to one rank


def test_bucket_never_exceeds_what_a_source_can_send():
    cfg = make_config("small", {"ep": 1, "capacity_factor": 10.0})
    assert cfg.recv_rows_per_src == cfg.max_rows_per_pair


@pytest.mark.parametrize("overrides,needle", [
    ({"topk": 9}, "topk=9 is larger than the number of experts"),
    ({"ep": 0}, "ep must be a positive integer"),
    ({"wgrad_tile": 7}, "not divisible by wgrad_tile=7"),
    ({"recv_rows_per_src": 20}, "not divisible by tile_m=16"),
    ({"dtype": "int8"}, "dtype must be one of"),
    ({"capacity_factor": 0}, "capacity_factor must be > 0"),
    ({"tile_m": -4}, "tile_m must be a positive integer"),
])
def test_bad_config_names_the_problem(overrides, needle):
    with pytest.raises(ConfigError) as exc:
        make_config("small", overrides)
    assert needle in str(exc.value)
    assert "\n" not in str(exc.value)


def test_unknown_preset_and_field():
    with pytest.raises(ConfigError, match="unknown preset 'nope'"):
        make_config("nope")
    with pytest.raises(ConfigError, match="unknown config field"):
        make_config("small", {"bogus": 1})
    with pytest.raises(ConfigError, match="missing config field"):
        make_config(None, {"ep": 2})


def test_json_config_then_flags(tmp_path):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"hidden": 96, "inter": 48, "topk": 3}))
    cfg = make_config("small", {"topk": 1}, str(path))
    assert (cfg.hidden, cfg.inter, cfg.topk) == (96, 48, 1)
    path.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="must hold a JSON object"):
        make_config("small", None, str(path))
