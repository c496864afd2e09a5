"""The guest's stdout and stderr: captured, capped, and streamed live.

The guest writes through to the host on every write (its streams are unbuffered),
and the host batches: a pump thread hands what has accumulated to `on_output`
every FLUSH_SECONDS while a turn runs, so a slow cell's prints show up as they
happen and a chatty cell costs one callback per batch, not per line.
"""

from __future__ import annotations

import codecs
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

FLUSH_SECONDS = 0.05
STREAMS = {1: "stdout", 2: "stderr"}

OnOutput = Callable[[str, str], None]  # (stream name, text)


def truncation_marker(name: str, cap: int) -> str:
    return (
        f"\n[wasm-kernel: {name} truncated after {cap} bytes; "
        f"raise ExecutionPolicy.{name}_max_bytes to see more]\n"
    )


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
    """Output of one turn. `write` runs on the guest thread; `flush` on any thread."""

    def __init__(
        self,
        on_output: OnOutput | None,
        stdout_cap: int | None,
        stderr_cap: int | None,
    ) -> None:
        self._on_output = on_output
        self._streams = {1: _Stream("stdout", stdout_cap), 2: _Stream("stderr", stderr_cap)}
        self._pending: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._deliver_lock = threading.Lock()  # keeps on_output calls in order, never overlapping
        self._done = threading.Event()
        self._pump: threading.Thread | None = None

    def start(self) -> None:
        if self._on_output is not None:
            self._pump = threading.Thread(target=self._run_pump, name="wasm-kernel-output", daemon=True)
            self._pump.start()

    def write(self, fd: int, data: bytes) -> None:
        s = self._streams[fd]
        if s.truncated:
            return
        marker = ""
        if s.cap is not None and s.seen + len(data) > s.cap:
            data = data[: max(0, s.cap - s.seen)]
            s.truncated = True
            marker = truncation_marker(s.name, s.cap)
        s.seen += len(data)
        text = s.decoder.decode(data, final=s.truncated) + marker
        if not text:
            return
        with self._lock:
            s.text.append(text)
            if self._pending and self._pending[-1][0] == s.name:
                self._pending[-1] = (s.name, self._pending[-1][1] + text)
            else:
                self._pending.append((s.name, text))

    def flush(self) -> None:
        """Deliver everything written so far, in order."""
        if self._on_output is None:
            return
        with self._deliver_lock:
            with self._lock:
                batch, self._pending = self._pending, []
            for name, text in batch:
                try:
                    self._on_output(name, text)
                except Exception:  # a broken callback must not stop the guest
                    pass

    def finish(self) -> None:
        for s in self._streams.values():
            tail = s.decoder.decode(b"", final=True)
            if tail:
                with self._lock:
                    s.text.append(tail)
                    self._pending.append((s.name, tail))
        self._done.set()
        if self._pump is not None:
            self._pump.join()
        self.flush()

    def text(self, name: str) -> str:
        fd = 1 if name == "stdout" else 2
        return "".join(self._streams[fd].text)

    def truncated(self, name: str) -> bool:
        return self._streams[1 if name == "stdout" else 2].truncated

    def _run_pump(self) -> None:
        while not self._done.wait(FLUSH_SECONDS):
            self.flush()
