"""The kernel's limits: what the operator configured, what the notebook may change.

The operator sets both the limits and their ceilings (`max_*`) in jupyter_config or
the kernel.json argv. The notebook (`%limits`, `%config`) is as untrusted as its
cells, so it may lower any limit, raise it back up to the ceiling, and never past it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..core.policy import MAX_GUEST_MEMORY, ExecutionPolicy
from .limit_values import (
    format_count,
    format_duration,
    format_size,
    parse_count,
    parse_duration,
    parse_size,
)

# name -> (policy field, parser, formatter, ceiling name)
LIMITS: dict[str, tuple[str, Any, Any, str]] = {
    "fuel": ("fuel_budget", parse_count, format_count, "max_fuel"),
    "memory": ("memory_bytes", parse_size, format_size, "max_memory"),
    "deadline": ("deadline_seconds", parse_duration, format_duration, "max_deadline"),
    "stdout": ("stdout_max_bytes", parse_size, format_size, "max_output_bytes"),
    "stderr": ("stderr_max_bytes", parse_size, format_size, "max_output_bytes"),
}


class LimitError(ValueError):
    """A refused limit change; the message is one line."""


@dataclass(frozen=True)
class Ceilings:
    max_fuel: int | None
    max_memory: int
    max_deadline: float | None
    max_output_bytes: int | None


def _above(value: float | None, ceiling: float | None) -> bool:
    """None means unlimited, for a value and for a ceiling alike."""
    if ceiling is None:
        return False
    return value is None or value > ceiling


def check_limit(name: str, value: Any, ceilings: Ceilings) -> Any:
    """The parsed value of limit `name`, or LimitError saying why it is refused."""
    if name not in LIMITS:
        raise LimitError(f"unknown limit {name!r}; the limits are: {', '.join(LIMITS)}")
    _field, parse, fmt, ceiling_name = LIMITS[name]
    try:
        parsed = parse(value, name)
    except ValueError as err:
        raise LimitError(str(err)) from None
    if parsed is None and name == "memory":
        raise LimitError("memory cannot be unlimited; give a size such as 512MB")
    if parsed is not None and parsed <= 0:
        raise LimitError(f"{name} must be greater than zero, got {value!r}")
    if name == "memory" and parsed > MAX_GUEST_MEMORY:
        raise LimitError(f"memory {fmt(parsed)} is more than a wasm32 guest can address ({fmt(MAX_GUEST_MEMORY)})")
    ceiling = getattr(ceilings, ceiling_name)
    if _above(parsed, ceiling):
        raise LimitError(
            f"{name} {fmt(parsed)} is above the operator's ceiling of {fmt(ceiling)} "
            f"(c.WasmKernel.{ceiling_name}); ask whoever runs this Jupyter to raise it"
        )
    return parsed


def apply_limit(policy: ExecutionPolicy, name: str, value: Any, ceilings: Ceilings) -> ExecutionPolicy:
    parsed = check_limit(name, value, ceilings)
    try:
        return replace(policy, **{LIMITS[name][0]: parsed})
    except ValueError as err:  # the policy's own bounds, e.g. memory >= 64 MiB
        raise LimitError(f"{name}: {err}") from None


def describe_limits(policy: ExecutionPolicy, ceilings: Ceilings) -> list[tuple[str, str, str]]:
    """(name, current, ceiling) rows for %limits and %session."""
    rows = []
    for name, (field, _parse, fmt, ceiling_name) in LIMITS.items():
        rows.append((name, fmt(getattr(policy, field)), fmt(getattr(ceilings, ceiling_name))))
    return rows


_TRAP_LIMIT = {"out_of_fuel": "fuel", "deadline": "deadline", "memory": "memory"}


def _raised(name: str, policy: ExecutionPolicy, ceilings: Ceilings, factor: int) -> tuple[Any, Any, Any]:
    """(current value, ceiling, a value `factor` times larger capped at the ceiling,
    or None when the limit is already at its ceiling). Only called for a limit that
    was hit, so the current value is never None."""
    field, _parse, _fmt, ceiling_name = LIMITS[name]
    current, ceiling = getattr(policy, field), getattr(ceilings, ceiling_name)
    if ceiling is not None and current >= ceiling:
        return current, ceiling, None
    bigger = current * factor
    return current, ceiling, bigger if ceiling is None else min(bigger, ceiling)


def trap_line(trap: str, policy: ExecutionPolicy, ceilings: Ceilings) -> str:
    """One line for a cell stopped by a limit: which one, and how to raise it here."""
    name = _TRAP_LIMIT.get(trap)
    if name is None:
        if trap == "stack_overflow":
            return "the cell recursed too deeply and overflowed the sandbox's stack; variables are as before the cell"
        return "the sandbox stopped the cell after a fault; variables are as they were before it ran"
    _field, _parse, fmt, ceiling_name = LIMITS[name]
    current, ceiling, suggestion = _raised(name, policy, ceilings, 2)
    what = {
        "fuel": f"the cell ran out of fuel ({fmt(current)} instructions)",
        "deadline": f"the cell ran past its {fmt(current)} deadline",
        "memory": f"the cell needed more memory than its {fmt(current)} limit",
    }[name]
    if suggestion is None:
        how = f"it is already at the operator's ceiling (c.WasmKernel.{ceiling_name})"
    else:
        value = {"fuel": lambda v: f"{v:.0e}".replace("+", ""), "deadline": lambda v: f"{v:g}s",
                 "memory": lambda v: f"{v // (1024 * 1024)}MiB"}[name](suggestion)
        how = f"raise it with %limits {name}={value}" + (f" (ceiling {fmt(ceiling)})" if ceiling is not None else "")
    return f"{what}; variables are as they were before the cell; {how}"


def truncation_hint(stream: str, policy: ExecutionPolicy, ceilings: Ceilings) -> str:
    """After a cell whose output was cut: how to see more, in this kernel's terms."""
    _field, _parse, fmt, ceiling_name = LIMITS[stream]
    current, _ceiling, bigger = _raised(stream, policy, ceilings, 4)
    if bigger is None:
        return f"[{stream} was cut at {fmt(current)}, the operator's ceiling (c.WasmKernel.{ceiling_name})]"
    return f"[{stream} was cut at {fmt(current)}; to see more: %limits {stream}={bigger // 1024}KiB]"
