"""SandboxLogger: structured execution events on structlog."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..host.log import get_logger

if TYPE_CHECKING:
    from .policy import ExecutionPolicy
    from .result import SandboxResult


class SandboxLogger:
    """Emits `execution.start` / `execution.complete` and other events.

    `logger` is any structlog-style logger; by default one that writes through the
    standard library's `logging` under the name "wasm_kernel".
    """

    def __init__(self, logger: Any | None = None) -> None:
        self._log = logger if logger is not None else get_logger("wasm_kernel")

    def log_event(self, event: str, level: str = "info", **fields: Any) -> None:
        getattr(self._log, level)(event, **{k: v for k, v in fields.items() if v is not None})

    def log_execution_start(self, runtime: str, policy: ExecutionPolicy, session_id: str | None = None) -> None:
        self.log_event(
            "execution.start",
            runtime=runtime,
            session_id=session_id,
            fuel_budget=policy.fuel_budget,
            cpu_seconds=policy.cpu_seconds,
            deadline_seconds=policy.deadline_seconds,
            memory_bytes=policy.memory_bytes,
        )

    def log_execution_complete(self, result: SandboxResult, session_id: str | None = None) -> None:
        self.log_event(
            "execution.complete",
            level="info" if result.success else "warning",
            session_id=session_id,
            success=result.success,
            metering=result.metering,
            fuel_consumed=result.fuel_consumed,
            cpu_ms=round(result.cpu_ms, 3),
            duration_ms=round(result.duration_ms, 3),
            trap=result.trap,
            rolled_back=result.rolled_back,
            memory_used_bytes=result.memory_used_bytes,
            files_created=len(result.files_created),
            files_modified=len(result.files_modified),
            files_deleted=len(result.files_deleted),
        )
