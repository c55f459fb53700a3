"""`hpmoe simulate` / `hpmoe tune` from the command line: output, files, one-line errors with exit 2."""
from __future__ import annotations

import json

import pytest

from hpmoe.cli import main
from hpmoe.sim.hw import load_hw, HwError


SMALL = ["--ep", "4", "--tokens", "512", "--hidden", "1024", "--inter", "512", "--experts-per-rank", "4",
         "--topk", "4", "--tile-m", "64", "--wgrad-tile", "128", "--token-tile", "64", "--workers-aic", "4",
         "--workers-aiv", "8"]


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_simulate_prints_labelled_predictions_and_writes_files(capsys, tmp_path):
    trace, png, summary = tmp_path / "t.json", tmp_path / "t.png", tmp_path / "s.json"
    code, out, err = run(capsys, "simulate", *SMALL, "--trace", str(trace), "--plot", str(png), "--json",
                         str(summary))
    assert code == 0, err
    assert out.startswith("PREDICTED on the ascend-a3 performance model")
    for d in ("fwd", "bwd"):
        assert f"{d}  HP-MoE SSC (predicted)" in out and f"{d}  kernel-by-kernel (pred.)" in out
    doc = json.loads(trace.read_text())
    assert "PREDICTED" in doc["otherData"]["note"]
    lanes = {(e["pid"], e["tid"]) for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    # every worker of every rank in both directions, plus link lanes and baseline lanes
    assert len(lanes) >= 2 * 4 * (4 + 8)
    tasks = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] % 10000 < 9000 and e["tid"] < 9000]
    data = json.loads(summary.read_text())
    assert data["predicted"] is True
    assert len(tasks) > 0 and all(e["dur"] >= 0 for e in tasks)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_simulate_reads_compiled_ssc_files(capsys, tmp_path):
    assert main(["compile", *SMALL, "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    code, out, err = run(capsys, "simulate", "--ssc", str(tmp_path), "--no-baseline")
    assert code == 0, err
    code2, out2, _ = run(capsys, "simulate", *SMALL, "--no-baseline")
    assert out == out2, "files on disk and a fresh compile must predict the same"


@pytest.mark.parametrize("argv, message", [
    (["--hw", "{hw}"], "unknown hardware parameter 'l3_mib'"),
    (["--routing", "lumpy"], "bad routing 'lumpy'"),
    (["--routing", "hot:0.95"], "compile with --recv-rows-per-src"),
    (["--tile-m", "48", "--recv-rows-per-src", "100"], "not divisible by tile_m"),
    (["--workers-aic", "30"], "the hardware model has 25 AIC"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, argv, message):
    hw = tmp_path / "hw.json"
    hw.write_text(json.dumps({"l3_mib": 4}))
    argv = [a.replace("{hw}", str(hw)) for a in argv]
    code, out, err = run(capsys, "simulate", *SMALL, *argv)
    assert code == 2
    assert message in err and err.count("\n") == 1 and err.startswith("hpmoe simulate: error:")


def test_hw_override_formats_and_validation(tmp_path):
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"hbm_gbps": 800, "remote_write_allocates_l2": True}))
    hw = load_hw(flat)
    assert hw.hbm_gbps == 800 and hw.remote_write_allocates_l2 is True
    assert "override" in hw.sources["hbm_gbps"]
    full = tmp_path / "full.json"
    full.write_text(json.dumps({"params": {"link_gbps": {"value": 100, "unit": "GB/s", "source": "measured"}}}))
    assert load_hw(full).link_gbps == 100 and load_hw(full).sources["link_gbps"] == "measured"
    for bad, msg in (({"hbm_efficiency": 1.5}, "fraction"), ({"num_aic": 2.5}, "integer"),
                     ({"link_gbps": "fast"}, "number"), ({"remote_write_allocates_l2": 1}, "true or false"),
                     ({"params": {"l2_mib": {"val": 1}}}, "no 'value'")):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(bad))
        with pytest.raises(HwError, match=msg):
            load_hw(path)


def test_every_default_parameter_has_unit_and_source():
    hw = load_hw()
    for name, value, unit, source in hw.table():
        assert unit and source, name
        assert source.startswith(("paper", "public", "assumption", "fitted")), (name, source)
