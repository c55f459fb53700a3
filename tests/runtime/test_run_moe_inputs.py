"""hpmoe.runtime.run_moe refuses bad inputs with one line before anything runs (issue 8)."""
from __future__ import annotations

import numpy as np
import pytest

from hpmoe.errors import InputError
from hpmoe.runtime import run_moe

from runtime_helpers import case


def _args(inputs):
    return dict(x=inputs.x, w1=inputs.w1, w2=inputs.w2, topk_ids=inputs.topk_ids,
                topk_weights=inputs.topk_weights, dy=inputs.dy)


@pytest.mark.parametrize("name", ["x", "w1", "w2", "dy", "topk_ids", "topk_weights"])
def test_wrong_number_of_ranks_is_refused(name):
    cfg, inputs, _ = case(ep=3)
    args = _args(inputs)
    args[name] = args[name][:2]  # a stack of 2 ranks for an EP-3 config
    with pytest.raises(InputError, match=rf"^{name} must have shape \(3, .*ep=3\), got \(2, "):
        run_moe(cfg, **args)


def test_missing_rank_axis_is_refused():
    cfg, inputs, _ = case(ep=3)
    args = _args(inputs)
    args["x"] = args["x"][0]
    with pytest.raises(InputError, match=r"^x must have shape \(3, 64, 64\)"):
        run_moe(cfg, **args)


def test_float_ids_are_refused_not_truncated():
    cfg, inputs, _ = case(ep=3)
    args = _args(inputs)
    args["topk_ids"] = inputs.topk_ids.astype(np.float64) + 0.5
    with pytest.raises(InputError, match="topk_ids must hold integers, got dtype float64"):
        run_moe(cfg, **args)


@pytest.mark.parametrize("bad, msg", [(-1, r"\[-1, 5\]"), (6, r"\[0, 6\]")])
def test_out_of_range_ids_are_refused(bad, msg):
    cfg, inputs, _ = case(ep=3)
    args = _args(inputs)
    ids = inputs.topk_ids.copy()
    ids[1, 5, 0] = bad
    args["topk_ids"] = ids
    with pytest.raises(InputError, match=r"topk_ids must lie in \[0, 6\), got values in " + msg):
        run_moe(cfg, **args)


@pytest.mark.parametrize("name", ["x", "topk_weights", "w2"])
def test_non_finite_values_are_refused(name):
    cfg, inputs, _ = case(ep=3)
    args = _args(inputs)
    bad = np.array(args[name], np.float64)
    bad.flat[3] = np.nan
    args[name] = bad
    with pytest.raises(InputError, match=f"^{name} holds a non-finite value$"):
        run_moe(cfg, **args)
