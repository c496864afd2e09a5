"""ExecutionPolicy: the limits applied to every cell a sandbox runs."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
# wasm32 addresses 4 GiB at most.
MAX_GUEST_MEMORY = 4 * GIB


@dataclass(frozen=True)
class ExecutionPolicy:
    """Per-cell limits. `None` switches a limit off.

    fuel_budget: wasm instructions a cell may execute (deterministic); counted only by a
    sandbox in fuel metering (GuestOptions.metering), ignored in time metering.
    cpu_seconds: CPU time a cell may use (what it computes, not what it waits for);
    the budget of a sandbox in time metering (the default), ignored in fuel metering.
    deadline_seconds: wall-clock time a cell may take; off by default for notebooks.
    memory_bytes: cap on the guest's linear memory; allocations past it raise MemoryError.
    stdout_max_bytes / stderr_max_bytes: output kept and streamed per cell.
    display_max_bytes: rich outputs (displays, results, tracebacks) sent per cell.
    disk_max_bytes / disk_max_files: the session's disk quota, bytes and names, over
    its workspace and private /tmp; a write past it fails with ENOSPC.
    interrupt_grace_seconds: an interrupt raises KeyboardInterrupt in the cell at its
    next safe point, keeping what it did so far, as CPython does on Ctrl-C; a cell
    that has not stopped after this long (a long call into compiled code) is
    stopped and rolled back. None: every interrupt rolls the cell back.
    """

    fuel_budget: int | None = 500_000_000_000  # about a minute of pure-Python work
    cpu_seconds: float | None = 60.0
    deadline_seconds: float | None = None
    memory_bytes: int = 2 * GIB
    stdout_max_bytes: int | None = 10 * MIB
    stderr_max_bytes: int | None = 10 * MIB
    display_max_bytes: int | None = 32 * MIB
    disk_max_bytes: int | None = 2 * GIB
    disk_max_files: int | None = 100_000
    interrupt_grace_seconds: float | None = 0.5

    def __post_init__(self) -> None:
        _positive_int("fuel_budget", self.fuel_budget)
        _positive_int("stdout_max_bytes", self.stdout_max_bytes)
        _positive_int("stderr_max_bytes", self.stderr_max_bytes)
        _positive_int("display_max_bytes", self.display_max_bytes)
        _positive_int("disk_max_bytes", self.disk_max_bytes)
        _positive_int("disk_max_files", self.disk_max_files)
        for name in ("cpu_seconds", "deadline_seconds"):
            _positive_seconds(name, getattr(self, name))
        if self.interrupt_grace_seconds is not None and not (
            isinstance(self.interrupt_grace_seconds, (int, float)) and 0 < self.interrupt_grace_seconds <= 60
        ):
            raise ValueError(
                f"interrupt_grace_seconds must be between 0 and 60 seconds, or None, got {self.interrupt_grace_seconds!r}"
            )
        if not isinstance(self.memory_bytes, int) or not 64 * MIB <= self.memory_bytes <= MAX_GUEST_MEMORY:
            raise ValueError(
                f"memory_bytes must be between 64 MiB and 4 GiB (wasm32), got {self.memory_bytes!r}"
            )

    def with_changes(self, **changes: Any) -> ExecutionPolicy:
        return replace(self, **changes)


def _positive_seconds(name: str, value: Any) -> None:
    if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0):
        raise ValueError(f"{name} must be a positive number of seconds or None, got {value!r}")


def _positive_int(name: str, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
