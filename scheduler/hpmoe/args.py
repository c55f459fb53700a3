"""Checked parsing of every user-given value: numbers, booleans, JSON files and paths.

One place for the rules, used by argparse `type=` converters (command-line flags) and by the config and
hardware loaders (JSON fields). Each check raises with a message naming the value and the rule it broke; the
CLI prints that as one line and exits 2. Paths are checked before any work starts, so a bad output path is
refused up front instead of after minutes of compiling or simulating.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn

INT32_MAX = 2**31 - 1


class ValueCheckError(ValueError):
    """A value breaks its rule; the message names both."""


# ---- values (JSON fields and flags) ----------------------------------------------------------------------
def check_int(name: str, value: Any, lo: int = 1, hi: int = INT32_MAX) -> int:
    """An integer in [lo, hi]; booleans and floats are refused (JSON 64.0 or true are not counts)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueCheckError(f"{name} must be an integer, got {value!r}")
    if value < lo and hi == INT32_MAX and lo in (0, 1):
        raise ValueCheckError(f"{name} must be a {'positive' if lo else 'non-negative'} integer, got {value}")
    if not lo <= value <= hi:
        raise ValueCheckError(f"{name} must be in [{lo}, {hi}], got {value}")
    return value


def check_float(name: str, value: Any, lo: float, hi: float = math.inf, lo_open: bool = False) -> float:
    """A finite number in [lo, hi] (or (lo, hi] when lo_open); NaN and infinities are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueCheckError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueCheckError(f"{name} must be finite, got {value}")
    if value < lo or (lo_open and value == lo) or value > hi:
        if hi == math.inf:
            bound = f"{'>' if lo_open else '>='} {lo:g}"
        else:
            bound = f"in {'(' if lo_open else '['}{lo:g}, {hi:g}]"
        raise ValueCheckError(f"{name} must be {bound}, got {value:g}")
    return value


def check_bool(name: str, value: Any) -> bool:
    """JSON true/false only: a string like "no" is truthy in Python and must not read as true."""
    if not isinstance(value, bool):
        raise ValueCheckError(f"{name} must be true or false, got {value!r}")
    return value


def check_choice(name: str, value: Any, choices) -> Any:
    if not isinstance(value, str) or value not in choices:
        raise ValueCheckError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


# ---- argparse converters -------------------------------------------------------------------------------
def _converter(parse: Callable[[str], Any], what: str) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueCheckError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix("value ")) from None
    convert.__name__ = what  # argparse names the converter in its "invalid ... value" message
    return convert


def _parse_int(text: str) -> int:
    try:
        return int(text.strip(), 10)
    except ValueError:
        raise ValueCheckError(f"value must be an integer, got {text!r}") from None


def _parse_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueCheckError(f"value must be a number, got {text!r}") from None


def int_arg(lo: int = 1, hi: int = INT32_MAX) -> Callable[[str], int]:
    return _converter(lambda t: check_int("value", _parse_int(t), lo, hi), "integer")


def float_arg(lo: float, hi: float = math.inf, lo_open: bool = False) -> Callable[[str], float]:
    return _converter(lambda t: check_float("value", _parse_float(t), lo, hi, lo_open), "number")


def int_list_arg(lo: int = 0, hi: int = INT32_MAX) -> Callable[[str], str]:
    """A comma-separated list of integers in [lo, hi] (e.g. GPU ids); checked, then passed on as given."""
    def parse(text: str) -> str:
        items = text.split(",")
        if not text or any(not item.strip() for item in items):
            raise ValueCheckError(f"value must be a comma-separated list of integers, got {text!r}")
        for item in items:
            check_int("value", _parse_int(item), lo, hi)
        return text
    return _converter(parse, "list")


# ---- files ---------------------------------------------------------------------------------------------
def read_json(path: str | os.PathLike, what: str) -> Any:
    """Parse a JSON file; every failure (missing, a directory, not UTF-8, not JSON, too deep) is one line."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        raise ValueCheckError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueCheckError(f"cannot read {what} {path}: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ValueCheckError(f"cannot read {what} {path}: not JSON ({exc.msg} at line {exc.lineno} "
                              f"column {exc.colno})") from None
    except RecursionError:
        raise ValueCheckError(f"cannot read {what} {path}: JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal of more digits than Python converts
        raise ValueCheckError(f"cannot read {what} {path}: {exc}") from None


def check_input_file(path: str | os.PathLike, what: str = "file") -> Path:
    p = Path(path)
    if not p.exists():
        raise ValueCheckError(f"{what} {path} does not exist")
    if p.is_dir():
        raise ValueCheckError(f"{what} {path} is a directory")
    if not os.access(p, os.R_OK):
        raise ValueCheckError(f"{what} {path} is not readable")
    return p


def _nearest_existing(p: Path) -> Path:
    for parent in [p, *p.parents]:
        if parent.exists():
            return parent
    return Path(".")


def check_output_file(path: str | os.PathLike, what: str = "output file") -> Path:
    """The file can be created or overwritten: not a directory, its folder exists, is a folder and writable."""
    p = Path(path)
    if str(path) == "" or p.is_dir():
        raise ValueCheckError(f"{what} {path!s:} is a directory" if str(path) else f"{what} path is empty")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        base = _nearest_existing(parent)
        if not base.is_dir():
            raise ValueCheckError(f"{what} {path} lies under {base}, which is a file")
        raise ValueCheckError(f"{what} {path}: folder {parent} does not exist")
    if not parent.is_dir():
        raise ValueCheckError(f"{what} {path} lies under {parent}, which is a file")
    existed = p.exists()
    try:  # a real probe: access() says yes to root, and to places like /proc where nothing can be created
        with open(p, "ab"):
            pass
    except OSError as exc:
        raise ValueCheckError(f"{what} {path} cannot be written: {exc.strerror or exc}") from None
    if not existed:
        p.unlink()
    return p


def check_output_dir(path: str | os.PathLike, what: str = "output folder") -> Path:
    """The folder exists and is writable, or can be created under the nearest existing folder."""
    p = Path(path)
    if str(path) == "":
        raise ValueCheckError(f"{what} path is empty")
    base = _nearest_existing(p)
    if not base.is_dir():
        raise ValueCheckError(f"{what} {path} is a file" if base == p else f"{what} {path} lies under {base}, "
                              f"which is a file")
    if not os.access(base, os.W_OK | os.X_OK):
        raise ValueCheckError(f"{what} {path}: {base} is not writable")
    return p


# ---- the parser itself: one line per error ---------------------------------------------------------------
class OneLineParser(argparse.ArgumentParser):
    """argparse prints usage plus the error (several lines); this prints only `prog: error: message`."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message.splitlines()[0] if message else 'bad arguments'}", file=sys.stderr)
        raise SystemExit(2)
