"""Coordinate descent over a schedule's parameters, shared by the A3-model tuner (sim/tune.py) and the GPU
tuner (cuda/tune.py): from the start, try every value of every parameter with the others at the best so far,
keep a candidate that `improves` on the best, repeat until a round changes nothing or `rounds` ran.
Candidates carry `params` (dict) and `skipped` (why it could not run, or "" / None)."""
from __future__ import annotations

from typing import Callable, TypeVar

C = TypeVar("C")


def coordinate_descent(start: C, space: dict[str, tuple], evaluate: Callable[[dict], C],
                       improves: Callable[[C, C], bool], rounds: int) -> C:
    best = start
    for _ in range(rounds):
        changed = False
        for name, values in space.items():
            for value in values:
                cand = evaluate({**best.params, name: value})
                if not cand.skipped and improves(cand, best):
                    best, changed = cand, True
        if not changed:
            break
    return best
