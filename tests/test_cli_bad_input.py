"""A hostile user's table: every subcommand, every flag, every kind of broken file. Each row must end in exit
code 2, exactly one line on stderr that names what was wrong, and no traceback -- in well under a second, even
where the config asks for more than the machine holds. Rows run in-process through hpmoe.cli.main (fast); a few
run as real processes to prove the exit path end to end."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from hpmoe import ssc_io
from hpmoe.cli import main
from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config

SMALL = ["--preset", "small"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Placeholder -> path: broken inputs of every kind, plus one valid SSC group to damage."""
    d = tmp_path_factory.mktemp("bad")
    f = {"dir": d / "a_dir", "file": d / "plain.txt", "out": d / "out", "missing": d / "missing.json",
         "empty_dir": d / "empty_dir"}
    f["dir"].mkdir()
    f["empty_dir"].mkdir()
    f["file"].write_text("hello\n")

    def write(name: str, data) -> None:
        path = d / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        f[name.split(".")[0]] = path

    json_files = {
        "notutf8.json": b"\xff\xfe{\x00", "notjson.json": "{ep: 4", "array.json": "[1, 2]", "empty.json": "",
        "tokens_str.json": '{"tokens": "64"}', "ratr_no.json": '{"ratr": "no"}', "interleave_1.json":
        '{"interleave": 1}', "unknown.json": '{"experts": 4}', "ep_float.json": '{"ep": 4.0}',
        "cf_nan.json": '{"capacity_factor": NaN}', "cf_inf.json": '{"capacity_factor": Infinity}',
        "ep_huge_float.json": '{"ep": 1e999}', "deep.json": "[" * 100000 + "]" * 100000,
        "hidden_huge.json": '{"hidden": 1000000000000000000000000000000}', "dtype_list.json": '{"dtype": []}',
        "ep_true.json": '{"ep": true}', "hw_inf.json": '{"hbm_gbps": Infinity}', "hw_nan.json":
        '{"link_gbps": NaN}', "hw_unknown.json": '{"warp_size": 32}', "hw_str.json": '{"num_aic": "25"}',
        "hw_int.json": '{"num_aic": 1.5}', "hw_frac.json": '{"hbm_efficiency": 1.5}', "hw_neg.json":
        '{"event_poll_us": -1}', "hw_params.json": '{"params": 3}', "hw_noval.json": '{"params": {"num_aic": {}}}',
        "hw_inf_int.json": '{"num_aic": Infinity}', "hw_tiny.json": '{"hbm_gbps": 1e-300}',
        "hw_workers.json": '{"num_aiv": 1e300}', "cf_str.json": '{"capacity_factor": "1.25"}',
        "wgrad_str.json": '{"wgrad_tile": "16"}',
    }
    for name, data in json_files.items():
        write(name, data)
    cfg = make_config("small", {"ep": 2})
    group = d / "group"
    group.mkdir()
    for s in compile_schedules(cfg, ["fwd"], [0, 1]):
        ssc_io.write(s, group / f"rank{s.rank}.fwd.ssc")
    good = (group / "rank0.fwd.ssc").read_bytes()
    write("truncated.ssc", good[:100])
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    write("corrupt.ssc", bytes(corrupt))
    f["ssc0"], f["ssc1"] = group / "rank0.fwd.ssc", group / "rank1.fwd.ssc"
    return {k: str(v) for k, v in f.items()}


# (argv with {placeholders}, a piece of the one error line). Grouped by subcommand.
COMPILE = [(["compile", *SMALL, *args, "-o", "{out}"], needle) for args, needle in [
    (["--ep", "0"], "--ep: must be a positive integer"), (["--ep", "-1"], "--ep: must be a positive integer"),
    (["--ep", "x"], "--ep: must be an integer, got 'x'"), (["--ep", "1.5"], "--ep: must be an integer"),
    (["--ep", "4096"], "the limit is"), (["--ep", "99999999999"], "--ep: must be in [1, 2147483647]"),
    (["--tokens", "0"], "--tokens: must be a positive"), (["--tokens", "100000000"], "the limit is"),
    (["--tokens", "1e3"], "--tokens: must be an integer"), (["--hidden", "0"], "--hidden: must be a positive"),
    (["--hidden", "70"], "hidden=70 is not divisible by wgrad_tile=16"), (["--inter", "-32"], "--inter: must"),
    (["--hidden", "3000000000"], "--hidden: must be in [1, 2147483647]"),
    (["--act-n-block", "12"], "act_n_block=12 is not a multiple of 8"),
    (["--gmm-n-block", "16", "--act-n-block", "8"], "not a multiple of the GMM column block 16"),
    (["--experts-per-rank", "0"], "--experts-per-rank: must"), (["--topk", "0"], "--topk: must"),
    (["--topk", "9"], "topk=9 is larger than the number of experts"), (["--dtype", "fp64"], "dtype must be one of"),
    (["--dtype", ""], "dtype must be one of"), (["--tile-m", "0"], "--tile-m: must"),
    (["--tile-m", "-16"], "--tile-m: must"), (["--recv-rows-per-src", "-16"], "--recv-rows-per-src: must"),
    (["--recv-rows-per-src", "17"], "recv_rows_per_src=17 is not divisible by tile_m=16"),
    (["--capacity-factor", "inf"], "--capacity-factor: must be finite"),
    (["--capacity-factor", "nan"], "--capacity-factor: must be finite"),
    (["--capacity-factor", "0"], "--capacity-factor: must be > 0"),
    (["--capacity-factor", "-1"], "--capacity-factor: must be > 0"),
    (["--capacity-factor", "abc"], "--capacity-factor: must be a number"),
    (["--wgrad-tile", "-16"], "--wgrad-tile: must be a non-negative integer"),
    (["--wgrad-tile", "7"], "hidden=64 is not divisible by wgrad_tile=7"),
    (["--token-tile", "-1"], "--token-tile: must"), (["--workers-aic", "0"], "--workers-aic: must"),
    (["--workers-aiv", "100000"], "num_aiv must be in [1, 1024]"), (["--rank", "-1"], "--rank: must"),
    (["--rank", "4"], "--rank 4 is outside the EP group of 4 ranks"), (["--rank", "x"], "--rank: must be an int"),
    (["--direction", "sideways"], "invalid choice: 'sideways'"), (["--preset", "nope"], "unknown preset 'nope'"),
    (["--rank", "0", "--all-ranks"], "not allowed with argument"), (["--bogus"], "unrecognized arguments: --bogus"),
    (["--config", "{missing}"], "No such file or directory"), (["--config", "{dir}"], "Is a directory"),
    (["--config", "{notutf8}"], "not UTF-8"), (["--config", "{notjson}"], "not JSON"),
    (["--config", "{empty}"], "not JSON"), (["--config", "{array}"], "must hold a JSON object"),
    (["--config", "{tokens_str}"], "tokens must be an integer, got '64'"),
    (["--config", "{ratr_no}"], "ratr must be true or false, got 'no'"),
    (["--config", "{interleave_1}"], "interleave must be true or false, got 1"),
    (["--config", "{unknown}"], "unknown config field(s): experts"),
    (["--config", "{ep_float}"], "ep must be an integer, got 4.0"),
    (["--config", "{cf_nan}"], "capacity_factor must be finite"),
    (["--config", "{cf_inf}"], "capacity_factor must be finite"),
    (["--config", "{ep_huge_float}"], "ep must be an integer, got inf"),
    (["--config", "{deep}"], "JSON nested too deeply"), (["--config", "{hidden_huge}"], "hidden must be in [1, "),
    (["--config", "{dtype_list}"], "dtype must be one of"),
    (["--config", "{cf_str}"], "capacity_factor must be a number, got '1.25'"),
    (["--config", "{wgrad_str}"], "wgrad_tile must be an integer, got '16'"),
    (["--config", "{ep_true}"], "ep must be an integer"),
]] + [
    (["compile", "--ep", "2", "-o", "{out}"], "missing config field(s)"),
    (["compile", *SMALL, "-o", "{file}/sub"], "lies under"),
    (["compile", *SMALL, "-o", "{file}"], "is a file"),
    (["compile", *SMALL, "-o"], "expected one argument"),
    (["compile", *SMALL, "-o", ""], "output folder path is empty"),
    (["compile", *SMALL], "the following arguments are required: -o/--output"),
]

INSPECT_VERIFY = [
    (["inspect", "{missing}"], "No such file or directory"), (["inspect", "{dir}"], "Is a directory"),
    (["inspect", "{file}"], "truncated"), (["inspect", "{notutf8}"], "truncated"),
    (["inspect", "{truncated}"], "truncated"), (["inspect", "{corrupt}"], "checksum mismatch"),
    (["inspect"], "the following arguments are required: file"), (["inspect", "{deep}"], "not an SSC file"),
    (["verify", "{missing}"], "No such file or directory"), (["verify", "{dir}"], "Is a directory"),
    (["verify", "{file}"], "truncated"), (["verify", "{ssc0}", "{truncated}"], "truncated"),
    (["verify", "--max-errors", "0", "{ssc0}"], "--max-errors: must be a positive integer"),
    (["verify", "--max-errors", "-1", "{ssc0}"], "--max-errors: must"),
    (["verify", "--max-errors", "x", "{ssc0}"], "--max-errors: must be an integer"),
    (["verify"], "the following arguments are required: files"),
]

RUN = [(["run", *args], needle) for args, needle in [
    (["--seed", "-1"], "--seed: must be in [0, 4294967295], got -1"), (["--seed", "x"], "--seed: must be an integer"),
    (["--seed", "99999999999"], "--seed: must be in [0, 4294967295]"), (["--timeout", "nan"], "must be finite"),
    (["--timeout", "-1"], "--timeout: must be in [0.01, 86400]"), (["--timeout", "0"], "--timeout: must be in"),
    (["--timeout", "inf"], "--timeout: must be finite"), (["--timeout", "1e9"], "--timeout: must be in"),
    (["--iterations", "0"], "--iterations: must be"), (["--iterations", "-5"], "--iterations: must be"),
    (["--iterations", "2.5"], "--iterations: must be an integer"), (["--routing", "nope"], "invalid choice"),
    (["--ep", "4096"], "worker threads"), (["--tokens", "100000000"], "the limit is"),
    (["--preset", "deepseek-v3"], "of memory (estimated from the config"),
    (["--ep", "8", "--workers-aic", "1000"], "worker threads"), (["--capacity-factor", "inf"], "must be finite"),
    (["--config", "{ratr_no}"], "ratr must be true or false"), (["--wgrad-tile", "-16"], "--wgrad-tile: must"),
    (["--routing", "skewed", "--recv-rows-per-src", "16"], "the SSC bucket holds C=16"),
    (["--threads", "--timeout", "-1"], "--timeout: must be in"), (["--config", "{missing}"], "No such file"),
    (["--backend", "cuda", "--devices", "a,b"], "--devices: must be an integer, got 'a'"),
    (["--backend", "cuda", "--devices", "0,,1"], "comma-separated list of integers"),
    (["--backend", "cuda", "--devices", "-1"], "--devices: must be in [0, 1023]"),
    (["--backend", "cuda", "--trace", "{file}/t.json"], "lies under"), (["--backend", "gpu"], "invalid choice"),
    (["--backend", "cuda", "--dtype", "bf16", "--ep", "4096"], "the limit is"),
    (["--backend", "ascendc-cpu", "--mixed-queues"], "AIC cannot run: drop it for --backend ascendc-cpu"),
    (["--backend", "ascendc-cpu", "--claim-pool"], "not built for the AscendC kernel"),
    (["--backend", "ascendc-cpu", "--act-n-block", "16"], "splits SwiGLU into column blocks"),
]]

SIMULATE = [(["simulate", *SMALL, *args], needle) for args, needle in [
    (["--hw", "{missing}"], "No such file or directory"), (["--hw", "{dir}"], "Is a directory"),
    (["--mixed-queues"], "compile with --no-mixed-queues"),
    (["--claim-pool"], "compile without --claim-pool"),
    (["--act-n-block", "16"], "compile without --act-n-block"),
    (["--hw", "{hw_inf}"], "hbm_gbps must be finite"), (["--hw", "{hw_nan}"], "link_gbps must be finite"),
    (["--hw", "{hw_unknown}"], "unknown hardware parameter 'warp_size'"),
    (["--hw", "{hw_str}"], "num_aic must be a number"), (["--hw", "{notjson}"], "not JSON"),
    (["--hw", "{hw_int}"], "num_aic must be an integer"), (["--hw", "{hw_frac}"], "is a fraction <= 1"),
    (["--hw", "{hw_neg}"], "event_poll_us must be >= 0"), (["--hw", "{hw_params}"], "'params' not an object"),
    (["--hw", "{hw_noval}"], "has no 'value'"), (["--hw", "{hw_inf_int}"], "num_aic must be finite"),
    (["--hw", "{notutf8}"], "not UTF-8"), (["--hw", "{hw_tiny}"], "times away from the A3 value"),
    (["--hw", "{hw_workers}"], "num_aiv must be at most 1024"),
    (["--routing", "zipf:nan"], "zipf exponent must be finite"), (["--routing", "zipf:inf"], "must be finite"),
    (["--routing", "zipf:-1"], "zipf exponent must be in [0, 100]"), (["--routing", "hot:2"], "hot fraction"),
    (["--routing", "hot:x"], "use balanced, zipf:S[:SEED] or hot:F[:SEED]"),
    (["--routing", "zipf:1:-5"], "routing seed must be in"), (["--routing", "bogus"], "bad routing 'bogus'"),
    (["--plot", "{file}/x.png"], "lies under"), (["--plot", "{dir}"], "is a directory"),
    (["--plot", "/proc/x.png"], "cannot be written"), (["--trace", "{dir}/no/t.json"], "does not exist"),
    (["--json", "{dir}"], "is a directory"), (["--ssc", "{file}"], "is not a folder"),
    (["--ssc", "{missing}"], "is not a folder"), (["--ssc", "{empty_dir}"], "no .ssc files"),
    (["--direction", "up"], "invalid choice: 'up'"), (["--ep", "4096"], "the limit is"),
    (["--capacity-factor", "inf"], "must be finite"), (["--workers-aic", "26"], "the hardware model has"),
    (["--config", "{ratr_no}"], "ratr must be true or false"),
]]

TUNE = [(["tune", *SMALL, *args], needle) for args, needle in [
    (["--rounds", "-1"], "--rounds: must be in [1, 100]"), (["--rounds", "0"], "--rounds: must be in [1, 100]"),
    (["--rounds", "x"], "--rounds: must be an integer"), (["-o", "{file}/x"], "lies under"),
    (["-o", "{dir}"], "is a directory"), (["--hw", "{hw_inf}"], "must be finite"),
    (["--routing", "hot:2"], "hot fraction"), (["--ep", "4096"], "the limit is"),
    (["--wgrad-tile", "-16"], "--wgrad-tile: must"),
]]

TOP = [([], "the following arguments are required: COMMAND"), (["bogus"], "invalid choice: 'bogus'")]

TABLE = COMPILE + INSPECT_VERIFY + RUN + SIMULATE + TUNE + TOP


def test_the_table_is_large_and_covers_every_subcommand():
    assert len(TABLE) >= 100
    assert {argv[0] for argv, _ in TABLE if argv} == {"compile", "inspect", "verify", "run", "simulate", "tune",
                                                      "bogus"}


def _fill(argv: list[str], files: dict[str, str]) -> list[str]:
    return [a.format(**files) if "{" in a and "zipf" not in a else a for a in argv]


@pytest.mark.parametrize("argv,needle", TABLE, ids=[" ".join(a) or "(none)" for a, _ in TABLE])
def test_bad_input_is_one_line_and_exit_2(argv, needle, files, capsys):
    start = time.perf_counter()
    try:
        code = main(_fill(argv, files))
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err and needle in err, err
    assert elapsed < 5.0, f"refused only after {elapsed:.1f} s"


@pytest.mark.parametrize("argv", [
    ["compile", *SMALL, "--ep", "4096", "-o", "{out}"],
    ["run", "--tokens", "100000000"],
    ["run", "--timeout", "-1"],
    ["compile", *SMALL, "--capacity-factor", "inf", "-o", "{out}"],
    ["simulate", *SMALL, "--hw", "{hw_inf}"],
])
def test_real_process_exits_2_with_one_line_in_well_under_a_second_of_work(argv, files):
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hpmoe.cli", *_fill(argv, files)], capture_output=True, text=True,
                          timeout=60)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert elapsed < 10.0, elapsed  # interpreter start-up and imports included, on a loaded shared machine


def test_wgrad_tile_zero_means_automatic_and_json_booleans_are_read_as_such(tmp_path):
    """The accepted neighbours of refused values still work: 0 = derive the tile, JSON false = off."""
    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(json.dumps({"ratr": False, "interleave": True}))
    cfg = make_config("small", {"wgrad_tile": 0}, str(cfg_file))
    assert cfg.wgrad_tile == 32 and cfg.ratr is False and cfg.interleave is True
