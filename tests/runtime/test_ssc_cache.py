"""hpmoe.runtime.ssc_cache: buckets compiled on first use, cached in memory and in ssc_dir, files of
`hpmoe compile` picked up (pinned), mismatched files refused, growth by 1.25x."""
from __future__ import annotations

import pytest

from hpmoe.cli import main as hpmoe_main
from hpmoe.config import make_config
from hpmoe.errors import RoutingError, SscFormatError
from hpmoe.runtime.ssc_cache import SscCache

BASE = dict(ep=2, tokens=40, hidden=32, inter=16, experts_per_rank=2, topk=2, tile_m=16, dtype="fp32",
            num_aic=1, num_aiv=2)


def test_growth_is_geometric_and_capped():
    cache = SscCache(make_config(None, BASE), rank=0)
    c0 = cache.first_capacity()  # 40*2/2*1.25 = 50 -> 64
    assert c0 == 64
    assert cache.capacity_for(50, c0) == 64
    assert cache.capacity_for(65, c0) == 80        # 64*1.25 = 80
    assert cache.capacity_for(80, 80) == 80
    assert cache.capacity_for(70, 112) == 112      # never shrinks
    assert cache.limit == 80                       # T * min(k, E_local) = 80 rows at most
    with pytest.raises(RoutingError, match="more than T\\*min\\(k, E_local\\)=80"):
        cache.capacity_for(81, c0)
    big = SscCache(make_config(None, dict(BASE, tokens=400)), rank=0)
    assert big.first_capacity() == 512                   # 400*2/2*1.25 = 500 -> 512
    assert big.capacity_for(513, 512) == 640             # 512 * 1.25
    assert big.capacity_for(641, 512) == 800             # 512 -> 640 -> 800


def test_compiled_buckets_are_written_and_read_back(tmp_path):
    cfg = make_config(None, BASE)
    first = SscCache(cfg, 1, tmp_path).get(64)
    assert first.source == "compiled"
    assert sorted(p.name for p in (tmp_path / "bucket-T40-C64").iterdir()) == [
        "rank0.bwd.ssc", "rank0.fwd.ssc", "rank1.bwd.ssc", "rank1.fwd.ssc"]
    again = SscCache(cfg, 1, tmp_path).get(64)
    assert again.source.startswith("cache ") and again.fwd == first.fwd and again.counters == first.counters


def test_files_of_hpmoe_compile_are_pinned(tmp_path):
    assert hpmoe_main(["compile", "--ep", "2", "--tokens", "40", "--hidden", "32", "--inter", "16",
                       "--experts-per-rank", "2", "--topk", "2", "--tile-m", "16", "--dtype", "fp32",
                       "--recv-rows-per-src", "48", "--all-ranks", "--direction", "both", "-o", str(tmp_path)]) == 0
    cache = SscCache(make_config(None, BASE), 0, tmp_path)
    assert cache.first_capacity() == 48 and cache.get(48).source.startswith("pinned ")
    with pytest.raises(RoutingError, match=r"sends 60 rows to one rank; the pinned SSCs in .* hold C=48; "
                                           r"compile with --recv-rows-per-src 64"):
        cache.capacity_for(60, 48)


def test_mismatched_files_are_refused(tmp_path):
    hpmoe_main(["compile", "--ep", "2", "--tokens", "40", "--hidden", "64", "--inter", "16",
                "--experts-per-rank", "2", "--topk", "2", "--tile-m", "16", "--dtype", "fp32", "--all-ranks",
                "--direction", "both", "-o", str(tmp_path)])
    with pytest.raises(SscFormatError, match=r"rank0.fwd.ssc: SSC compiled for hidden=64, this call needs hidden=32"):
        SscCache(make_config(None, BASE), 0, tmp_path)


def test_incomplete_group_is_refused(tmp_path):
    hpmoe_main(["compile", "--ep", "2", "--tokens", "40", "--hidden", "32", "--inter", "16",
                "--experts-per-rank", "2", "--topk", "2", "--tile-m", "16", "--dtype", "fp32", "--rank", "0",
                "--direction", "both", "-o", str(tmp_path)])
    with pytest.raises(SscFormatError, match=r"lacks rank1.fwd.ssc: compile the whole group"):
        SscCache(make_config(None, BASE), 0, tmp_path)
