"""What `wasm-kernel run` takes besides the file: the limits its flags set (and the
limit lines that name those flags), the answers to input(), colour and strictness.

A notebook's limit lines say `%limits deadline=4s`; a CLI user cannot type that, so
the lines a script run prints name the flag instead (`--deadline 4s`). The flags take
the spellings %limits takes (`30s`, `2GiB`, `5e9`, `none`), parsed by the same code.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from ..core.policy import MAX_GUEST_MEMORY, ExecutionPolicy
from ..kernel.kernel_limits import LIMITS, LimitError, Remedies, check_limit

# The limits with a flag of their own; every limit also takes --limit NAME=VALUE.
LIMIT_FLAGS = {"deadline": "--deadline", "memory": "--memory", "fuel": "--fuel", "cpu": "--cpu-time"}


def _raise_to(name: str, value: str) -> str:
    flag = LIMIT_FLAGS.get(name)
    return f"{flag} {value}" if flag else f"--limit {name}={value}"


def _at_ceiling(name: str) -> str:
    spec = LIMITS[name]
    return f"{spec.fmt(spec.highest)} is the most a sandbox may have"


CLI_REMEDIES = Remedies(raise_to=_raise_to, at_ceiling=_at_ceiling,
                        free_space="free space by deleting files in /app or /tmp")
# The most a CLI run may set: its user is the operator, so only the hard bounds hold
# (a nullable limit can be switched off; memory stops at what wasm32 addresses).
CLI_CEILING = ExecutionPolicy(fuel_budget=None, cpu_seconds=None, deadline_seconds=None, memory_bytes=MAX_GUEST_MEMORY,
                              stdout_max_bytes=None, stderr_max_bytes=None, display_max_bytes=None,
                              disk_max_bytes=None, disk_max_files=None)


# The errors a limit causes, in a notebook run: the kernel's names for a stopped cell,
# and what an allocation past the memory limit raises.
LIMIT_ERRORS = {"DeadlineExceeded": "deadline", "FuelExhausted": "fuel", "CpuTimeExceeded": "cpu",
                "MemoryLimit": "memory",
                "MemoryError": "memory", "_ArrayMemoryError": "memory"}


def raise_for_the_run(name: str, policy: ExecutionPolicy) -> str | None:
    """After a notebook cell that limit `name` stopped: the flag that raises it for the
    whole run (the kernel's own line names %limits and its configuration, which a CLI
    user did not type). None when the run set no such limit (the notebook did)."""
    from ..kernel.kernel_limits import typed

    spec = LIMITS[name]
    current, top = getattr(policy, spec.field), getattr(CLI_CEILING, spec.field)
    if current is None:
        return None
    if top is not None and current >= top:
        return f"{name}: {_at_ceiling(name)}"
    bigger = current * 2 if top is None else min(current * 2, top)
    return f"to raise the {name} limit for this run: {_raise_to(name, typed(spec.fmt(bigger)))}"


class Answers:
    """`--stdin FILE`: the answers to input(), one line each, in order. Past the last
    line input() raises EOFError, as it does on a closed stdin."""

    def __init__(self, source: TextIO | None, name: str) -> None:
        self._source, self.name = source, name
        self.exhausted = False

    @classmethod
    def open(cls, spec: str | None) -> Answers:
        if spec is None:
            return cls(None, "")
        if spec == "-":
            return cls(sys.stdin, "stdin")
        return cls(Path(spec).open(encoding="utf-8", errors="replace"), spec)

    @property
    def given(self) -> bool:
        return self._source is not None

    def next(self) -> str:
        """The next answer, or EOFError (its message says why)."""
        if self._source is None:
            self.exhausted = True
            raise EOFError("EOF when reading a line (give `wasm-kernel run --stdin FILE` the answers, one a line)")
        line = self._source.readline()
        if not line:
            self.exhausted = True
            raise EOFError(f"EOF when reading a line ({self.name} has no more answers)")
        return line.rstrip("\r\n")

    def close(self) -> None:
        if self._source is not None and self._source is not sys.stdin:
            self._source.close()


@dataclass
class RunOptions:
    limits: dict[str, Any] = field(default_factory=dict)  # limit name -> parsed value, from the flags
    metering: str | None = None  # --metering, else the kernel's configured one
    strict: bool = False
    color: str = "auto"
    answers: Answers = field(default_factory=lambda: Answers(None, ""))
    timeout: float | None = None  # notebooks: nbclient's per-cell timeout


def limit_flags(deadline: str | None, memory: str | None, fuel: str | None, others: list[str],
                cpu: str | None = None) -> dict[str, Any]:
    """{limit: parsed value} from the flags; LimitError (one line) for a value no sandbox takes."""
    given: dict[str, str] = {}
    for item in others:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in LIMITS:
            raise LimitError(f"--limit takes NAME=VALUE, NAME one of {', '.join(LIMITS)}; got {item!r}")
        given[name] = value.strip()
    for name, value in (("deadline", deadline), ("memory", memory), ("fuel", fuel), ("cpu", cpu)):
        if value is not None:
            given[name] = value
    return {name: check_limit(name, value) for name, value in given.items()}


def kernel_arguments(limits: dict[str, Any]) -> list[str]:
    """The limits as the kernel takes them on its command line (WasmKernel's traits)."""
    return [f"--WasmKernel.{LIMITS[name].trait}={value!r}" for name, value in limits.items()]


def script_policy(limits: dict[str, Any]) -> ExecutionPolicy:
    """A script's limits: the kernel's configuration (kernel_config.py), then the flags."""
    from ..kernel.kernel_limits import LIMIT_TRAITS, apply_limit
    from .kernel_config import kernel_config

    configured = kernel_config().get("WasmKernel", {})
    policy = ExecutionPolicy()
    for trait, name in LIMIT_TRAITS.items():
        if trait in configured:
            try:
                policy = apply_limit(policy, name, configured[trait], None)
            except LimitError as err:
                print(f"wasm-kernel run: warning: c.WasmKernel.{trait}: {err}; using the default", file=sys.stderr)
    for name, value in limits.items():
        policy = replace(policy, **{LIMITS[name].field: value})
    return policy
