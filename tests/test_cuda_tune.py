"""`hpmoe tune --backend cuda` without a GPU: the search with a mock runner, the tuning cache, the refusals."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hpmoe import tuning_cache
from hpmoe.config import make_config
from hpmoe.cuda.native import CudaFailure
from hpmoe.errors import HpmoeError
from hpmoe.cuda.tune import candidate_config, search_space, tune_cuda

MIXTRAL = dict(ep=1, tokens=4096, hidden=4096, inter=14336, experts_per_rank=8, topk=2, dtype="bf16", tile_m=128,
               wgrad_tile=256, num_aic=112, num_aiv=20, mixed_queues=True, claim_pool=True)


def test_search_finds_the_fastest_candidate_and_skips_refused_ones():
    cfg = make_config(None, MIXTRAL)

    def runner(c):  # a made-up cost surface: best at 120+12 workers, blocks 2048 and 1024, SwiGLU in GMM blocks,
        if c.row_pipelines:  # pipelines refused
            raise CudaFailure("refused by the backend")
        return (10.0 + abs(c.num_aic - 120) * 0.1 + (0 if c.gmm_n_block == 2048 else 1.0) + (c.tile_m == 256)
                + (0 if c.wgrad_n_block == 1024 else 0.5) + (0 if c.act_n_block == c.gmm_n_block else 0.3))

    res = tune_cuda(cfg, runner)
    assert res.best.params == {"variant": "mixed+pool", "workers": "120+12", "tile_m": 128, "gmm_n_block": 2048,
                               "wgrad_n_block": 1024, "act_n_block": "gmm"}
    assert res.best_cfg.num_aic == 120 and res.best_cfg.gmm_n_block == 2048 and res.best_cfg.claim_pool
    assert res.best_cfg.wgrad_n_block == 1024 and res.best_cfg.act_n_block == 2048
    assert any(t.skipped for t in res.tried) and res.best.ms == pytest.approx(10.0)


def test_search_space_is_valid_for_the_shape():
    cfg = make_config(None, MIXTRAL)
    space = search_space(cfg)
    assert space["workers"] == ("112+20", "120+12", "128+4")
    for block in space["gmm_n_block"]:
        c = candidate_config(cfg, {"variant": "mixed", "workers": "112+20", "tile_m": 256, "gmm_n_block": block})
        assert c.recv_rows_per_src % 256 == 0 and c.gmm_n_block == block
    assert space["wgrad_n_block"] == (0, 1024, 2048) and space["act_n_block"] == (0, "gmm")
    split = candidate_config(cfg, {"variant": "mixed+pool", "workers": "112+20", "tile_m": 128, "gmm_n_block": 0,
                                   "act_n_block": "gmm"})
    assert split.act_n_block == 2048  # the compiler's GMM block at this shape
    with pytest.raises(HpmoeError, match="no GMM column split in force"):  # row pipelines do not split GMMs
        candidate_config(cfg, {"variant": "pipelines+pool", "workers": "112+20", "tile_m": 128, "gmm_n_block": 0,
                               "act_n_block": "gmm"})
    transposed = make_config(None, {**MIXTRAL, "weights_transposed": True})
    c = candidate_config(transposed, {"variant": "mixed+pool", "workers": "112+20", "tile_m": 128, "gmm_n_block": 768,
                                      "act_n_block": "gmm"})
    assert c.act_n_block == 768  # lcm(768, wgrad_tile 256)
    for block in space["wgrad_n_block"]:
        c = candidate_config(cfg, {"variant": "mixed+pool", "workers": "112+20", "tile_m": 128, "gmm_n_block": 0,
                                   "wgrad_n_block": block})
        assert c.wgrad_n_block == block


def test_cache_round_trip_and_key(tmp_path):
    path = tmp_path / "tuning.json"
    cfg = make_config(None, {**MIXTRAL, "weights_transposed": True, "gmm_n_block": 2048})
    key = tuning_cache.shape_key(cfg)
    assert key == "ep1-t4096-h4096-i14336-e8-k2-bf16-wt"
    assert tuning_cache.lookup(key, "NVIDIA H200", path) is None  # no file yet
    tuning_cache.store(key, "NVIDIA H200", cfg, 12.5, path)
    got = tuning_cache.lookup(key, "NVIDIA H200", path)
    assert got["gmm_n_block"] == 2048 and got["num_aic"] == 112 and set(got) == set(tuning_cache.SCHEDULE_FIELDS)
    assert tuning_cache.lookup(key, "NVIDIA H100", path) is None
    assert make_config(None, {**MIXTRAL, **got}).gmm_n_block == 2048  # applies as config fields
    path.write_text("not json")
    assert tuning_cache.lookup(key, "NVIDIA H200", path) is None  # unreadable: fall back to the compiler
    data = json.loads(json.dumps({"version": 99, "entries": {}}))
    path.write_text(json.dumps(data))
    assert tuning_cache.lookup(key, "NVIDIA H200", path) is None


def test_cli_refuses_without_a_gpu():
    from hpmoe.cuda.native import gpu_count
    if gpu_count() > 0:
        pytest.skip("a GPU is present: the measuring path runs in tests/cuda")
    p = subprocess.run([sys.executable, "-m", "hpmoe.cli", "tune", "--backend", "cuda", "--preset", "small"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "GPU" in p.stderr, p.stderr


def test_cli_refuses_a_warm_up_outside_its_range():
    """--warm-seconds (untimed launches before a candidate is timed, for the power-capped clock) is checked
    before anything runs: one line naming it."""
    p = subprocess.run([sys.executable, "-m", "hpmoe.cli", "tune", "--backend", "cuda", "--preset", "small",
                        "--warm-seconds", "-1"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "hpmoe tune: error: argument --warm-seconds: must be in [0, 60], got -1"], p.stderr


def test_gpu_measurer_draws_inputs_once_in_the_configs_layout_and_refuses_another_shape():
    from hpmoe.cuda.tune import GpuMeasurer

    small = dict(MIXTRAL, tokens=64, hidden=64, inter=128, experts_per_rank=4, wgrad_tile=64, weights_transposed=True)
    cfg = make_config(None, small)
    m = GpuMeasurer(cfg, [0], routing="random")
    assert m.warm_s == 0.0  # the library default; the CLI's is 1 s
    x, w1, w2, dy = m.inputs[0]
    # bf16 bits, w1 / w2 stored as nn.Linear's layout ([E, 2I, h] / [E, h, I]) because the config says so
    assert (x.dtype, x.shape, dy.shape) == ("uint16", (64, 64), (64, 64))
    assert w1.shape == (4, 256, 64) and w2.shape == (4, 64, 128)
    with pytest.raises(ValueError, match="another shape"):
        m(cfg.replace(tokens=128))


def test_tune_checks_the_routing_per_backend():
    """The A3 model refuses the GPU's routings by name, in one line; the GPU backend parses them."""
    run = lambda *a: subprocess.run([sys.executable, "-m", "hpmoe.cli", "tune", "--preset", "small", *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=120)
    a3 = run("--routing", "random")
    assert a3.returncode != 0 and "bad routing 'random'" in a3.stderr and len(a3.stderr.strip().splitlines()) == 1
    cuda = run("--routing", "random", "--backend", "cuda", "--tokens", "0")
    assert "bad routing" not in cuda.stderr
