"""SandboxResult: everything one execute() produced."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ..runtime.guest_config import TrapReason, TurnOutcome
from ..runtime.guest_messages import Output

__all__ = ["ErrorInfo", "SandboxResult", "TrapReason"]


@dataclass(frozen=True)
class ErrorInfo:
    """A Python exception raised by the cell; the traceback holds guest frames only."""

    ename: str
    evalue: str
    traceback: list[str]


@dataclass
class SandboxResult:
    success: bool
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = 0
    error: ErrorInfo | None = None
    trap: TrapReason | None = None
    trap_message: str | None = None
    rolled_back: bool = False
    restarted: bool = False
    # An interrupt that did not stop the cell at a safe point within the policy's
    # interrupt_grace_seconds: the cell was stopped and rolled back instead.
    interrupt_grace_expired: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    display_truncated: bool = False
    disk_full: bool = False  # a write was refused by the disk quota
    fuel_consumed: int = 0  # 0 in time metering, which counts none
    cpu_ms: float = 0.0  # the CPU time the cell used
    metering: str = "time"  # what bounded the cell: "time" (CPU time, deadline) or "fuel"
    memory_used_bytes: int = 0  # the guest's whole linear memory at the turn's end (wasm memory only grows)
    memory_growth_bytes: int = 0  # how much of it this turn added: 0 when it fit in memory already there
    duration_ms: float = 0.0
    network_requests: int = 0  # requests made through the network door
    network_bytes: int = 0  # response bytes read through it
    outputs: list[Output] = field(default_factory=list)  # displays and tracebacks, in order
    payload: list[dict[str, Any]] = field(default_factory=list)  # IPython payloads: page, set_next_input
    files_created: list[str] = field(default_factory=list)
    files_modified: list[str] = field(default_factory=list)
    files_deleted: list[str] = field(default_factory=list)
    workspace_path: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_outcome(cls, outcome: TurnOutcome, **own: Any) -> SandboxResult:
        """The result of a turn: every field the two share copied by name, and `own`,
        what only the sandbox knows (success, error as ErrorInfo, the trap's message,
        the files, metadata)."""
        return cls(**{name: getattr(outcome, name) for name in OUTCOME_FIELDS if name not in own}, **own)

    @property
    def truncated(self) -> bool:
        return self.stdout_truncated or self.stderr_truncated or self.display_truncated


# The turn's fields a result carries as they are (`error` is converted, so not here);
# TurnOutcome's status, process_exited and query_result are the sandbox's to read.
OUTCOME_FIELDS = tuple(f.name for f in fields(SandboxResult)
                       if f.name in {g.name for g in fields(TurnOutcome)} and f.name != "error")
