"""Shared fixtures for the simulator tests: small groups compiled once per session."""
from __future__ import annotations

import pytest

from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config
from hpmoe.sim.hw import load_hw

from sim_helpers import MID


@pytest.fixture(scope="session")
def hw():
    return load_hw()


@pytest.fixture(scope="session")
def mid_cfg():
    return make_config("deepseek-v3", MID)


@pytest.fixture(scope="session")
def mid_schedules(mid_cfg):
    return compile_schedules(mid_cfg, ["fwd", "bwd"], list(range(mid_cfg.ep)))
