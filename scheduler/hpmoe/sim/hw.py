"""Hardware parameters of the performance model: one JSON file, every value with its unit and its source.

`hw/a3.json` holds the Ascend A3 defaults. `load_hw(path)` applies a user's override file on top of them, either
as a flat JSON object {name: value} or in the same {"params": {name: {"value": ...}}} format, so someone with
an A3 can calibrate any subset. Unknown names and values of the wrong type are refused with one line.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from ..args import ValueCheckError, read_json
from ..config import MAX_WORKERS
from ..errors import HpmoeError

DEFAULT_HW = Path(__file__).resolve().parent / "hw" / "a3.json"
PLAUSIBLE_FACTOR = 1e6  # a calibrated value lies within this factor of the A3 default


class HwError(HpmoeError):
    """A hardware-model file is unreadable, names an unknown parameter, or gives a bad value."""


@dataclasses.dataclass(frozen=True)
class Hardware:
    """Parameter values (in the units a3.json names) and where each came from."""
    values: dict[str, Any]
    sources: dict[str, str]
    units: dict[str, str]
    name: str = "ascend-a3"

    def __getattr__(self, item: str) -> Any:
        try:
            return self.__dict__["values"][item]
        except KeyError:
            raise AttributeError(item) from None

    # ---- derived rates in bytes/us and flop/us (the simulator's time unit is the microsecond) -------------
    @property
    def hbm_bytes_per_us(self) -> float:
        return self.hbm_gbps * self.hbm_efficiency * 1e3

    @property
    def l2_bytes_per_us(self) -> float:
        return self.hbm_bytes_per_us * self.l2_read_bw_ratio

    @property
    def l2_capacity(self) -> int:
        return int(self.l2_mib * 2**20 * self.l2_usable_fraction)

    @property
    def link_bytes_per_us(self) -> float:
        return self.link_gbps * 1e3

    @property
    def cube_flop_per_us(self) -> float:
        return self.cube_tflops_per_aic * 1e6

    @property
    def vector_ops_per_us(self) -> float:
        return self.vector_gops_per_aiv * 1e3

    @property
    def memory_budget_bytes(self) -> int:
        return int(self.hbm_gib * 2**30 * self.memory_budget_fraction)

    def replace(self, **changes: Any) -> "Hardware":
        values = dict(self.values)
        for k, v in changes.items():
            values[k] = _check_value(k, v, self.values)
        return dataclasses.replace(self, values=values)

    def table(self) -> list[tuple[str, Any, str, str]]:
        return [(k, self.values[k], self.units[k], self.sources[k]) for k in self.values]


def _check_value(name: str, value: Any, defaults: dict[str, Any]) -> Any:
    if name not in defaults:
        raise HwError(f"unknown hardware parameter {name!r}; known: {', '.join(sorted(defaults))}")
    want = type(defaults[name])
    if want is bool:
        if not isinstance(value, bool):
            raise HwError(f"hardware parameter {name} must be true or false, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HwError(f"hardware parameter {name} must be a number, got {value!r}")
    if not math.isfinite(value):  # JSON Infinity/NaN parse; no rate or size of a device is infinite
        raise HwError(f"hardware parameter {name} must be finite, got {value!r}")
    if not value > 0 and name not in ("event_poll_us", "link_latency_us", "static_dispatch_us",
                                      "dynamic_dispatch_us", "kernel_launch_us", "collective_overhead_us",
                                      "collective_per_peer_us", "cube_half_m", "cube_half_n", "cube_half_k"):
        raise HwError(f"hardware parameter {name} must be > 0, got {value!r}")
    if value < 0:
        raise HwError(f"hardware parameter {name} must be >= 0, got {value!r}")
    if name in ("hbm_efficiency", "l2_usable_fraction", "cube_max_efficiency", "memory_budget_fraction") \
            and value > 1:
        raise HwError(f"hardware parameter {name} is a fraction <= 1, got {value!r}")
    if name in ("num_aic", "num_aiv", "cube_block_m", "cube_block_n", "cube_fractal") and int(value) != value:
        raise HwError(f"hardware parameter {name} must be an integer, got {value!r}")
    if name in ("num_aic", "num_aiv") and value > MAX_WORKERS:
        raise HwError(f"hardware parameter {name} must be at most {MAX_WORKERS}, got {value!r}")
    default = defaults[name]
    if value != 0 and default != 0 and not default / PLAUSIBLE_FACTOR <= value <= default * PLAUSIBLE_FACTOR:
        # 1e-300 GB/s or 1e300 TFLOP/s give predictions of 10^300 ms: a typo, not a calibration
        raise HwError(f"hardware parameter {name}={value!r} is more than {PLAUSIBLE_FACTOR:.0e} times away from "
                      f"the A3 value {default!r}")
    return int(value) if want is int and int(value) == value else value


def _read_json(path: Path) -> Any:
    try:
        return read_json(path, "hardware file")
    except ValueCheckError as exc:
        raise HwError(str(exc)) from None


def _defaults() -> Hardware:
    data = _read_json(DEFAULT_HW)
    params = data["params"]
    return Hardware({k: p["value"] for k, p in params.items()}, {k: p["source"] for k, p in params.items()},
                    {k: p["unit"] for k, p in params.items()}, data.get("name", "ascend-a3"))


def load_hw(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> Hardware:
    """A3 defaults, then the override file (if any), then explicit overrides."""
    hw = _defaults()
    changes: dict[str, Any] = {}
    sources = dict(hw.sources)
    if path is not None:
        data = _read_json(Path(path))
        if not isinstance(data, dict):
            raise HwError(f"hardware file {path} must hold a JSON object")
        if "params" in data:
            extra = sorted(set(data) - {"params", "name", "description"})
            if extra or not isinstance(data["params"], dict):
                raise HwError(f"hardware file {path}: unknown top-level field(s) {extra} or 'params' not an object")
            params = data["params"]
        else:
            params = data
        for name, entry in params.items():
            if isinstance(entry, dict):
                if "value" not in entry:
                    raise HwError(f"hardware file {path}: parameter {name} has no 'value'")
                extra = set(entry) - {"value", "unit", "source"}
                if extra:
                    raise HwError(f"hardware file {path}: parameter {name} has unknown field(s) {sorted(extra)}")
                changes[name] = entry["value"]
                if name in sources:
                    sources[name] = entry.get("source", f"override from {path}")
            else:
                changes[name] = entry
                if name in sources:
                    sources[name] = f"override from {path}"
    changes.update(overrides or {})
    hw = hw.replace(**changes)
    return dataclasses.replace(hw, sources=sources)
