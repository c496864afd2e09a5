"""SandboxResult: everything one execute() produced."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..runtime.guest_config import TrapReason
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

    @property
    def truncated(self) -> bool:
        return self.stdout_truncated or self.stderr_truncated or self.display_truncated
