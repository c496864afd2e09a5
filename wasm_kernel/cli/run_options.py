"""What `wasm-kernel run` takes besides the file: the limits its flags set (and the
limit lines that name those flags), the answers to input(), colour and strictness.

A notebook's limit lines say `%limits deadline=4s`; a CLI user cannot type that, so
the lines a run prints name the flag instead (`--deadline 4s`): a script's, from
these remedies; a notebook's, from its kernel, started with WasmKernel.cli_run. The flags take
the spellings %limits takes (`30s`, `2GiB`, `5e9`, `none`), parsed by the same code.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from ..core.policy import ExecutionPolicy
from ..kernel.kernel_limits import LIMITS, RUN, RUN_CEILING, LimitError, check_limit

# The remedies that name the run's flags (RUN_FLAGS), and the most they may set:
# the kernel's, which a notebook run's kernel uses too.
CLI_REMEDIES = RUN
CLI_CEILING = RUN_CEILING


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
