"""Exception types. Each carries a one-line message that names what was wrong; the CLI prints it and exits 2."""


class HpmoeError(Exception):
    """Base class for every error the CLI reports as one line."""


class ConfigError(HpmoeError, ValueError):
    """A configuration field is missing, inconsistent or out of range."""


class SscFormatError(HpmoeError):
    """An SSC file is truncated, corrupted, of another version, or does not match the config."""


class ScheduleError(HpmoeError):
    """A schedule violates an invariant (coverage, thresholds, acyclicity, write overlap)."""


class RoutingError(HpmoeError):
    """Routing does not fit the shape bucket an SSC was compiled for."""


class InputError(HpmoeError, ValueError):
    """An input array has the wrong shape, dtype or values (ids out of range or not integers)."""
