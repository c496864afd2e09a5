"""The kernel's limits: what the operator configured, what the notebook may change.

The operator sets the limits in jupyter_config or the kernel.json argv, within the
hard ceilings `max_*` (so a slip in one kernel.json cannot hand out a terabyte).
The notebook (`%limits`, `%config`) is as untrusted as its cells, so its limits go
downward only: it may lower any limit, set it back, and never pass the operator's value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..core.policy import MAX_GUEST_MEMORY, ExecutionPolicy
from .limit_values import (
    format_count,
    format_duration,
    format_size,
    typed,
    parse_count,
    parse_duration,
    parse_size,
)

@dataclass(frozen=True)
class LimitSpec:
    field: str  # the ExecutionPolicy field
    parse: Any
    fmt: Any
    trait: str  # the WasmKernel trait the operator sets it with
    lowest: Any  # the smallest value accepted
    highest: Any  # the largest value any kernel accepts, whatever the operator says
    nullable: bool = True  # whether "none" (no limit) is a value


# Fuel is a u64 in wasmtime and a deadline becomes a timer: past these bounds the
# host would overflow, so no configuration, the operator's included, goes there.
LIMITS: dict[str, LimitSpec] = {
    "fuel": LimitSpec("fuel_budget", parse_count, format_count, "fuel", 1, 10**18),
    "cpu": LimitSpec("cpu_seconds", parse_duration, format_duration, "cpu_time", 0.001, 1e7),
    "memory": LimitSpec("memory_bytes", parse_size, format_size, "memory", 64 * 1024 * 1024, MAX_GUEST_MEMORY, False),
    "deadline": LimitSpec("deadline_seconds", parse_duration, format_duration, "deadline", 0.001, 1e7),
    "stdout": LimitSpec("stdout_max_bytes", parse_size, format_size, "stdout_max_bytes", 1, 1 << 40),
    "stderr": LimitSpec("stderr_max_bytes", parse_size, format_size, "stderr_max_bytes", 1, 1 << 40),
    "display": LimitSpec("display_max_bytes", parse_size, format_size, "display_max_bytes", 1, 1 << 40),
    "disk": LimitSpec("disk_max_bytes", parse_size, format_size, "disk_max_bytes", 1, 1 << 50),
    "files": LimitSpec("disk_max_files", parse_count, format_count, "disk_max_files", 1, 10**9),
}


# WasmKernel's limit traits and the limit each sets (the CLI's script runs read the same).
LIMIT_TRAITS = {"fuel": "fuel", "cpu_time": "cpu", "memory": "memory", "deadline": "deadline",
                "stdout_max_bytes": "stdout", "stderr_max_bytes": "stderr", "display_max_bytes": "display",
                "disk_max_bytes": "disk", "disk_max_files": "files"}


class LimitError(ValueError):
    """A refused limit change; the message is one line."""


def _above(value: float | None, ceiling: float | None) -> bool:
    """None means unlimited, for a value and for a ceiling alike."""
    if ceiling is None:
        return False
    return value is None or value > ceiling


def accepted_range(name: str, ceiling: ExecutionPolicy | None = None) -> str:
    """`1 to 5e+11`: what `name` accepts under `ceiling` (the hard bounds without one)."""
    spec = LIMITS[name]
    top = spec.highest if ceiling is None else getattr(ceiling, spec.field)
    if top is None:
        return f"{spec.fmt(spec.lowest)} to {spec.fmt(spec.highest)}, or none"
    return f"{spec.fmt(spec.lowest)} to {spec.fmt(top)}"


def _typed(value: Any) -> str:
    """What the notebook typed, short: a 400-digit number is not worth echoing whole."""
    text = str(value).strip()
    return text if len(text) <= 24 else text[:20] + "..."


def check_limit(name: str, value: Any, ceiling: ExecutionPolicy | None = None) -> Any:
    """The parsed value of limit `name`, or LimitError naming it and what it accepts.

    `ceiling` holds the most this notebook may have: the operator's values. A
    notebook lowers a limit, or sets it back, never past what the operator gave it.
    """
    if name not in LIMITS:
        raise LimitError(f"unknown limit {name!r}; the limits are: {', '.join(LIMITS)}")
    spec = LIMITS[name]
    try:
        parsed = spec.parse(value, name)
    except (ValueError, OverflowError) as err:
        raise LimitError(f"{str(err).splitlines()[0]}; {name} accepts {accepted_range(name, ceiling)}") from None
    if parsed is None and not spec.nullable:
        raise LimitError(f"{name} cannot be unlimited; {name} accepts {accepted_range(name, ceiling)}")
    if parsed is not None and not spec.lowest <= parsed <= spec.highest:
        raise LimitError(f"{name} {_typed(value)} is out of range; {name} accepts {accepted_range(name, ceiling)}")
    if ceiling is not None and _above(parsed, getattr(ceiling, spec.field)):
        raise LimitError(
            f"{name} {spec.fmt(parsed)} is above this kernel's limit; a notebook may only lower it: "
            f"{name} accepts {accepted_range(name, ceiling)} (the operator sets c.WasmKernel.{spec.trait})"
        )
    return parsed


def apply_limit(
    policy: ExecutionPolicy, name: str, value: Any, ceiling: ExecutionPolicy | None = None
) -> ExecutionPolicy:
    parsed = check_limit(name, value, ceiling)
    try:
        return replace(policy, **{LIMITS[name].field: parsed})
    except ValueError as err:  # the policy's own bounds
        raise LimitError(f"{name}: {err}") from None


# The limit each metering counts: the other is not applied (core/sandbox._cell_limits).
UNUSED_BY = {"time": "fuel", "fuel": "cpu"}


def limits_in_use(metering: str) -> list[str]:
    """The limits a kernel of `metering` applies (%limits shows and takes these)."""
    return [name for name in LIMITS if name != UNUSED_BY.get(metering)]


def describe_limits(
    policy: ExecutionPolicy, ceiling: ExecutionPolicy, disk_used: tuple[int, int] | None = None,
    metering: str = "time",
) -> list[tuple[str, str, str]]:
    """(name, current, the most the notebook may set) rows for %limits and %session,
    after the metering's own row; the disk quota's rows say how much of it is used."""
    used = {} if disk_used is None else {"disk": format_size(disk_used[0]), "files": format_count(disk_used[1])}
    rows = [("metering", metering, "the operator's (c.WasmKernel.metering)")]
    return rows + [(name, LIMITS[name].fmt(getattr(policy, LIMITS[name].field))
                    + (f" ({used[name]} used)" if name in used else ""),
                    LIMITS[name].fmt(getattr(ceiling, LIMITS[name].field)))
                   for name in limits_in_use(metering)]


_TRAP_LIMIT = {"out_of_fuel": "fuel", "cpu_time": "cpu", "deadline": "deadline", "memory": "memory"}


def _raised(name: str, policy: ExecutionPolicy, ceiling: ExecutionPolicy, factor: int) -> tuple[Any, Any, Any]:
    """(current value, the operator's value, a value `factor` times larger capped at
    the operator's, or None when the limit is already the operator's). Only called
    for a limit that was hit, so the current value is never None."""
    spec = LIMITS[name]
    current, top = getattr(policy, spec.field), getattr(ceiling, spec.field)
    if top is not None and current >= top:
        return current, top, None
    bigger = current * factor
    return current, top, bigger if top is None else min(bigger, top)


def _operator_only(name: str) -> str:
    return f"it is this kernel's limit, set by whoever runs this Jupyter (c.WasmKernel.{LIMITS[name].trait})"


@dataclass(frozen=True)
class Remedies:
    """How whoever reads a limit line raises a limit or frees space. A notebook's are
    its magics; `wasm-kernel run` passes its own flags (RUN, below), so one
    wording serves both and each names only what its reader can type."""

    raise_to: Callable[[str, str], str] = lambda name, value: f"%limits {name}={value}"
    at_ceiling: Callable[[str], str] = _operator_only  # the limit cannot go higher
    free_space: str = "free space with %rm"


NOTEBOOK = Remedies()

# `wasm-kernel run`'s flags for the limits that have one; every limit also takes
# --limit NAME=VALUE. Here, not in cli/: the kernel a run starts says them itself
# (WasmKernel.cli_run), so a run's limit line is one line naming what its user types.
RUN_FLAGS = {"deadline": "--deadline", "memory": "--memory", "fuel": "--fuel", "cpu": "--cpu-time"}


def _run_raise_to(name: str, value: str) -> str:
    flag = RUN_FLAGS.get(name)
    return f"{flag} {value}" if flag else f"--limit {name}={value}"


def _run_at_ceiling(name: str) -> str:
    spec = LIMITS[name]
    return f"{spec.fmt(spec.highest)} is the most a sandbox may have"


RUN = Remedies(raise_to=_run_raise_to, at_ceiling=_run_at_ceiling,
               free_space="free space by deleting files in /app or /tmp")
# The most a run's flags may set: its user is the operator, so only the hard bounds
# hold (a nullable limit can be switched off; memory stops at what wasm32 addresses).
RUN_CEILING = ExecutionPolicy(fuel_budget=None, cpu_seconds=None, deadline_seconds=None, memory_bytes=MAX_GUEST_MEMORY,
                              stdout_max_bytes=None, stderr_max_bytes=None, display_max_bytes=None,
                              disk_max_bytes=None, disk_max_files=None)


ROLLED_BACK = "variables are as they were before it ran"


def interrupted_line(grace: float | None = None) -> str:
    """The one sentence for a cell an interrupt stopped and rolled back; `grace`: the
    soft interrupt's, which the cell did not take in time."""
    if grace is None:
        return f"the cell was interrupted; {ROLLED_BACK}"
    return (f"the cell did not stop within {grace:g} s of the interrupt (it was in a long call into compiled "
            f"code), so it was stopped and rolled back; {ROLLED_BACK}")


def trap_line(trap: str, policy: ExecutionPolicy, ceiling: ExecutionPolicy, remedies: Remedies = NOTEBOOK) -> str:
    """One line for a cell stopped by a limit or an interrupt: which one, and whether
    a limit can go back up."""
    if trap == "interrupted":
        return interrupted_line()
    name = _TRAP_LIMIT.get(trap)
    if name is None:
        if trap == "stack_overflow":
            return "the cell recursed too deeply and overflowed the sandbox's stack; variables are as before the cell"
        return f"the sandbox stopped the cell after a fault; {ROLLED_BACK}"
    fmt = LIMITS[name].fmt
    current, top, suggestion = _raised(name, policy, ceiling, 2)
    what = {
        "fuel": f"the cell ran out of fuel ({fmt(current)} instructions)",
        "cpu": f"the cell used its {fmt(current)} of CPU time",
        "deadline": f"the cell ran past its {fmt(current)} deadline",
        "memory": f"the cell needed more memory than its {fmt(current)} limit",
    }[name]
    if suggestion is None:
        how = remedies.at_ceiling(name)
    else:
        how = f"raise it with {remedies.raise_to(name, typed(fmt(suggestion)))}" + (
            f" (at most {fmt(top)})" if top is not None else "")
    return f"{what}; variables are as they were before the cell; {how}"


# What an allocation the guest's memory limit refused raises: Python's own, and numpy's.
MEMORY_ERRORS = ("MemoryError", "_ArrayMemoryError")
# numpy refuses an array whose size does not fit the guest's 32-bit address space with
# a ValueError of its own, before asking for memory: the same limit, said another way.
ARRAY_TOO_BIG = "array is too big"


def is_memory_error(ename: str, evalue: str) -> bool:
    return ename in MEMORY_ERRORS or (ename == "ValueError" and evalue.startswith(ARRAY_TOO_BIG))


def memory_error_hint(policy: ExecutionPolicy, ceiling: ExecutionPolicy, too_big: bool = False,
                      remedies: Remedies = NOTEBOOK) -> str:
    """After a cell that raised MemoryError: the sandbox's memory limit was the cause
    (a wasm32 guest has no other), its value, and how to raise it. too_big: numpy's
    "array is too big", an array past what a 32-bit guest can address at all."""
    fmt = LIMITS["memory"].fmt
    current, top, bigger = _raised("memory", policy, ceiling, 2)
    if too_big:
        return (f"[the array is larger than a 32-bit sandbox can address, whatever its memory limit "
                f"({fmt(current)} now, at most {fmt(top)}); use a smaller array, a smaller dtype, or chunks]")
    how = remedies.at_ceiling("memory") if bigger is None else (
        f"raise it with {remedies.raise_to('memory', typed(fmt(bigger)))} (at most {fmt(top)})")
    return f"[the allocation failed against the sandbox's memory limit of {fmt(current)}; {how}]"


def truncation_hint(stream: str, policy: ExecutionPolicy, ceiling: ExecutionPolicy,
                    remedies: Remedies = NOTEBOOK) -> str:
    """After a cell whose output was cut: how to see more, in this kernel's terms."""
    fmt = LIMITS[stream].fmt
    current, _top, bigger = _raised(stream, policy, ceiling, 4)
    what = "rich output (display)" if stream == "display" else stream
    if bigger is None:
        return f"[{what} was cut at {fmt(current)}; {remedies.at_ceiling(stream)}]"
    return f"[{what} was cut at {fmt(current)}; to see more: {remedies.raise_to(stream, typed(fmt(bigger)))}]"


def _typed_value(name: str, value: int) -> str:
    """A value as a notebook would type it after %limits name=."""
    return typed(LIMITS[name].fmt(value))


def disk_full_line(policy: ExecutionPolicy, ceiling: ExecutionPolicy, used: tuple[int, int],
                   remedies: Remedies = NOTEBOOK) -> str:
    """After a cell a write of which the disk quota refused: which quota, and what to do."""
    size, files = LIMITS["disk"], LIMITS["files"]
    quota = (f"{size.fmt(policy.disk_max_bytes)} and {files.fmt(policy.disk_max_files)} files "
             f"(now {size.fmt(used[0])}, {files.fmt(used[1])} files)")
    raisable = [name for name in ("disk", "files") if _raised(name, policy, ceiling, 2)[2] is not None]
    if raisable:
        how = " or raise it with " + " ".join(
            remedies.raise_to(name, _typed_value(name, _raised(name, policy, ceiling, 2)[2])) for name in raisable)
    else:
        how = f"; {remedies.at_ceiling('disk')}"
    return (f"[the cell hit the session's disk quota of {quota} in /app and /tmp, and got "
            f"'No space left on device'; {remedies.free_space}{how}]")
