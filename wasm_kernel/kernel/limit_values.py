"""Parsing and formatting of the values people type for limits: `256MB`, `30s`, `5e9`.

Used by `%limits`, `%config` and the kernel's traits, so one spelling means one
thing for every limit. (Ages for pruning are parsed by the sessions layer's
parse_duration_hours, shared by `%prune` and `wasm-kernel sessions prune`.) Every error is one line naming what was wrong.
"""

from __future__ import annotations

import math
import re

_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "kib": 1024,
    "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
    "g": 1000**3, "gb": 1000**3, "gib": 1024**3,
}
_DURATION_UNITS = {"": 1.0, "ms": 1e-3, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_COUNT_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "b": 10**9, "t": 10**12}
_NUMBER = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*", re.IGNORECASE)
_OFF = {"none", "off", "unlimited"}


def _split(text: str, what: str, units: dict) -> tuple[float, str]:
    match = _NUMBER.fullmatch(text)
    if match is None or match.group(2).lower() not in units:
        known = ", ".join(u for u in units if u)
        raise ValueError(f"{what}: cannot read {text!r}; write a number with an optional unit ({known})")
    value = float(match.group(1))
    if not math.isfinite(value):
        raise ValueError(f"{what}: {text!r} is not a finite number")
    return value, match.group(2).lower()


def parse_size(text: str | int, what: str = "size") -> int:
    """Bytes from `256MB`, `2GiB`, `1048576`."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    value, unit = _split(str(text), what, _SIZE_UNITS)
    return _whole(value * _SIZE_UNITS[unit], text, what)


def parse_duration(text: str | float, what: str = "duration") -> float | None:
    """Seconds from `30s`, `500ms`, `24h`, `2d`; None for `none`/`off`."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    if str(text).strip().lower() in _OFF:
        return None
    value, unit = _split(str(text), what, _DURATION_UNITS)
    seconds = value * _DURATION_UNITS[unit]
    if not math.isfinite(seconds):
        raise ValueError(f"{what}: {text!r} is too large")
    return seconds


def parse_count(text: str | int, what: str = "count") -> int | None:
    """A count from `5e9`, `500G`, `1000000`; None for `none`/`off`."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    if str(text).strip().lower() in _OFF:
        return None
    value, unit = _split(str(text), what, _COUNT_UNITS)
    return _whole(value * _COUNT_UNITS[unit], text, what)


def _whole(value: float, text: object, what: str) -> int:
    if not math.isfinite(value):
        raise ValueError(f"{what}: {text!r} is too large")
    return int(value)


def format_size(count: int | None) -> str:
    if count is None:
        return "unlimited"
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count} B"


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "none"
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"


def format_count(count: int | None) -> str:
    if count is None:
        return "unlimited"
    if count < 10**6:
        return str(count)
    text = f"{count:.3g}"  # 5e+12: written as a notebook types it, 5e12
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    return f"{mantissa}e{int(exponent)}"


def typed(text: str) -> str:
    """A formatted value as %limits takes it: `2 GiB` -> `2GiB`, `30 s` -> `30s`."""
    return text.replace(" ", "")
