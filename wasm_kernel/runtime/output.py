"""The guest's stdout and stderr: captured, capped, and streamed live.

The guest's streams are line-buffered, and the host batches what they write.
Whenever the host regains control (the 10 ms epoch check while the guest computes,
or the ticker's thread on an engine without epochs; each slice of a sleep, each
door call, the end of the turn) it hands over what has accumulated if FLUSH_SECONDS
have passed since the turn began or since the last hand-over. As ipykernel's OutStream
coalesces writes within its flush interval, one print() that reaches the host in
several writes (the text, then its newline) arrives as one stream message; a slow
cell's prints still show up as they happen, a chatty cell costs one callback per
batch. One lock keeps the two threads that may hand output over in order.
"""

from __future__ import annotations

import codecs
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

FLUSH_SECONDS = 0.05

OnOutput = Callable[[str, str], None]  # (stream name, text)


def truncation_marker(name: str, cap: int) -> str:
    # How to raise the cap depends on who runs the sandbox (ExecutionPolicy for the
    # library, %limits in the kernel), so the marker only says what happened.
    return f"\n[wasm-kernel: {name} truncated after {cap} bytes: the cell's {name} limit]\n"


@dataclass
class _Stream:
    name: str
    cap: int | None
    decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace")
    )
    seen: int = 0
    truncated: bool = False
    text: list[str] = field(default_factory=list)


class TurnOutput:
    """Output of one turn: the guest's thread and, without epochs, the ticker's."""

    def __init__(
        self,
        on_output: OnOutput | None,
        stdout_cap: int | None,
        stderr_cap: int | None,
        on_pending: Callable[[], None] | None = None,
        keep: bool = True,
    ) -> None:
        self._on_output = on_output
        self._keep = keep or on_output is None  # text() is all a caller with no callback gets
        self._on_pending = on_pending  # told when output starts waiting for a flush
        self._streams = {1: _Stream("stdout", stdout_cap), 2: _Stream("stderr", stderr_cap)}
        self._pending: list[tuple[str, str]] = []
        self._last_flush = time.monotonic()
        self._lock = threading.RLock()

    def write(self, fd: int, data: bytes) -> None:
        with self._lock:
            self._write(fd, data)

    def _write(self, fd: int, data: bytes) -> None:
        s = self._streams[fd]
        if s.truncated:
            return
        marker = ""
        if s.cap is not None and s.seen + len(data) > s.cap:
            data = data[: max(0, s.cap - s.seen)]
            s.truncated = True
            marker = truncation_marker(s.name, s.cap)
        s.seen += len(data)
        self._append(s, s.decoder.decode(data, final=s.truncated) + marker)
        self.maybe_flush()

    def _append(self, s: _Stream, text: str) -> None:
        if not text:
            return
        if self._keep:
            s.text.append(text)
        if self._on_output is None:
            return
        if self._pending and self._pending[-1][0] == s.name:
            self._pending[-1] = (s.name, self._pending[-1][1] + text)
        else:
            was_empty = not self._pending
            self._pending.append((s.name, text))
            if was_empty and self._on_pending is not None:
                self._on_pending()

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def maybe_flush(self) -> None:
        """Deliver pending output if the last delivery is FLUSH_SECONDS old."""
        if self._pending and time.monotonic() - self._last_flush >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Deliver everything written so far, in order."""
        with self._lock:
            self._last_flush = time.monotonic()
            if not self._pending or self._on_output is None:
                return
            batch, self._pending = self._pending, []
            for name, text in batch:
                try:
                    self._on_output(name, text)
                except Exception:  # a broken callback must not stop the guest
                    pass

    def finish(self) -> None:
        with self._lock:
            for s in self._streams.values():
                self._append(s, s.decoder.decode(b"", final=True))
            self.flush()

    def text(self, name: str) -> str:
        return "".join(self._streams[1 if name == "stdout" else 2].text)

    def truncated(self, name: str) -> bool:
        return self._streams[1 if name == "stdout" else 2].truncated
