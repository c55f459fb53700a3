"""Helpers shared by the simulator tests (a unique module name: tests/ has no packages)."""
from __future__ import annotations

# deepseek-v3 shapes shrunk so that a whole EP4 group compiles and simulates in well under a second.
MID = {"ep": 4, "tokens": 512, "hidden": 1024, "inter": 512, "experts_per_rank": 4, "topk": 4, "tile_m": 64,
       "wgrad_tile": 128, "token_tile": 64, "num_aic": 4, "num_aiv": 8}


def group(schedules, direction):
    return [s for s in schedules if s.direction_name == direction]
