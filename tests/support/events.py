"""What a SandboxLogger logged, kept for assertions (the `events` fixture gives one)."""

from __future__ import annotations


class Events:
    """A SandboxLogger whose events are kept: (level, event, fields) per call."""

    def __init__(self) -> None:
        import structlog
        from structlog.testing import CapturingLogger

        from wasm_kernel import SandboxLogger

        self._cap = CapturingLogger()
        self.logger = SandboxLogger(structlog.wrap_logger(self._cap, processors=[]))

    @property
    def all(self) -> list[tuple[str, str, dict[str, object]]]:
        return [(c.method_name, c.kwargs["event"], {k: v for k, v in c.kwargs.items() if k != "event"}) for c in self._cap.calls]

    def named(self, name: str) -> list[dict[str, object]]:
        return [fields for _, event, fields in self.all if event == name]

    def names(self) -> list[str]:
        return [event for _, event, _ in self.all]

    def warnings(self) -> list[tuple[str, dict[str, object]]]:
        return [(event, fields) for level, event, fields in self.all if level in ("warning", "error")]
