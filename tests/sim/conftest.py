"""Shared fixtures for the simulator tests: small groups compiled once per session."""
from __future__ import annotations

import pytest

from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config
from hpmoe.sim.hw import load_hw

# deepseek-v3 shapes shrunk so that a whole EP4 group compiles and simulates in well under a second.
MID = {"ep": 4, "tokens": 512, "hidden": 1024, "inter": 512, "experts_per_rank": 4, "topk": 4, "tile_m": 64,
       "wgrad_tile": 128, "token_tile": 64, "num_aic": 4, "num_aiv": 8}


@pytest.fixture(scope="session")
def hw():
    return load_hw()


@pytest.fixture(scope="session")
def mid_cfg():
    return make_config("deepseek-v3", MID)


@pytest.fixture(scope="session")
def mid_schedules(mid_cfg):
    return compile_schedules(mid_cfg, ["fwd", "bwd"], list(range(mid_cfg.ep)))


def group(schedules, direction):
    return [s for s in schedules if s.direction_name == direction]
