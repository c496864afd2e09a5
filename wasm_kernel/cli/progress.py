"""Progress for the one-time work of a machine's first run (runtime/startup.py, the one
start-up path), drawn on stderr so it never mixes into a command's output: the
guest's compile (the fast baseline one for a first `run`, the optimised one for
`precompile`), IPython's bytecode, the warm image, and the optimised compile a first
run leaves to a background process.

None of this work reports how far it got; the runtime measures it (host/work_meter.py:
the CPU time spent against what the step cost when it last ran on this machine), and
a step draws that reading: the percentage and the time left at the rate the work gets
now. The figure never claims the end before the work ends: past its recorded cost it
says the step is still working and for how long, until the call really returns. A
step with nothing to measure (staging files, waiting for another process) draws its
time so far. On a terminal each step is one line redrawn in place, twice a second;
into a pipe or a file (CI logs) it is a line when the step starts, one every 30 s
while it runs, and one when it ends.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from ..host.work_meter import WorkProgress
from .terminal_printer import ERASE_LINE, is_terminal

# What each step does is the runtime's (runtime/startup.py); its readings say how far it got.
WAIT_WARMUP = "Waiting for the background warm-up (pid {pid}), {step}"

_TICK_S = 0.5  # how often a terminal line is redrawn
_HEARTBEAT_S = 30.0  # how often a pipe hears that a step still runs
_SPINNER = "|/-\\"
_BAR = 12


class Step:
    """One step of the work, drawn while it runs. Its __call__ is the Progress
    callback the runtime takes (a WorkProgress reading, or nothing for a step that
    has none): the first call starts the drawing, so a step whose work was done
    already (cached) draws nothing. finish() ends it."""

    def __init__(self, what: str, stream: TextIO | None = None, *, running_for: float = 0.0) -> None:
        """running_for: how long the work has run already (another process's)."""
        self.what, self.running_for = what, running_for
        self.stream = stream if stream is not None else sys.stderr
        self.tty = is_terminal(self.stream)
        self.started: float | None = None
        self.reading: WorkProgress | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._last_heartbeat = 0.0

    def __call__(self, reading: WorkProgress | None = None) -> None:
        if reading is not None and not reading.done:
            self.reading = reading
        if self.started is not None:
            return
        with self._lock:
            if self.started is not None:
                return
            self.started = time.monotonic() - self.running_for
            self._last_heartbeat = self.running_for // _HEARTBEAT_S * _HEARTBEAT_S
            if not self.tty:
                already = f" (running for {self.running_for:.0f} s)" if self.running_for >= 1 else ""
                self._write(f"{self.what} ...{already}\n")
            self._thread = threading.Thread(target=self._run, name="wasm-kernel-cli-progress", daemon=True)
            self._thread.start()

    def describe(self, what: str) -> None:
        """A new description for the step (what it waits for changed)."""
        self.what = what

    def line(self, now: float) -> str:
        """The step as it stands `now` (monotonic seconds): the measured percentage and
        time left while the work is within its measured cost, else a spinner and the
        time so far."""
        return _fit(self.what, self.state(now))

    def state(self, now: float) -> str:
        elapsed = now - (self.started or now)
        reading = self.reading
        if reading is not None and reading.seconds_left is not None:
            filled = _BAR * reading.percent // 100
            return f"{reading.percent:3d}% [{'#' * filled}{' ' * (_BAR - filled)}] {elapsed:.0f} s, {reading.left_text()}"
        spin = _SPINNER[int(elapsed / _TICK_S) % len(_SPINNER)]
        if reading is not None:
            return f"{spin} {reading.percent}% {elapsed:.0f} s, still working"
        return f"{spin} {elapsed:.0f} s"

    def finish(self, ok: bool = True) -> None:
        """The work returned: the step's last line, with the time it really took."""
        if self.started is None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        took = time.monotonic() - self.started
        verdict = f"done in {took:.0f} s" if ok else f"stopped after {took:.0f} s"
        if self.tty:
            self._write(ERASE_LINE + _fit(self.what, verdict) + "\n")
        else:
            self._write(f"{self.what}: {verdict}\n")

    def _run(self) -> None:
        while not self._stop.wait(_TICK_S if self.tty else 1.0):
            now = time.monotonic()
            if self.tty:
                self._write(ERASE_LINE + self.line(now))
                continue
            elapsed = now - (self.started or now)
            if elapsed - self._last_heartbeat >= _HEARTBEAT_S:
                self._last_heartbeat = elapsed // _HEARTBEAT_S * _HEARTBEAT_S
                said = self.reading.text() if self.reading is not None else f"still working, {elapsed:.0f} s"
                self._write(f"{self.what}: {said}\n")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr: the work goes on
            pass


def _fit(what: str, state: str) -> str:
    """One terminal row: a line that wrapped could not be redrawn in place."""
    width = max(40, shutil.get_terminal_size((100, 24)).columns - 1)
    room = width - len(state) - 2
    if len(what) > room:
        what = what[: max(10, room - 3)] + "..."
    return f"{what}: {state}"


@contextmanager
def step(what: str, stream: TextIO | None = None) -> Iterator[Step]:
    drawn = Step(what, stream)
    try:
        yield drawn
    except BaseException:
        drawn.finish(ok=False)
        raise
    drawn.finish()


class TerminalSteps:
    """The start-up's steps (runtime/startup.StartupProgress) drawn on a stream, each
    by a Step of its own."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self._step: Step | None = None

    def started(self, what: str) -> None:
        self._step = Step(what, self.stream)
        self._step()

    def reading(self, reading: Any) -> None:
        if self._step is not None:
            self._step(reading)

    def finished(self, ok: bool) -> None:
        if self._step is not None:
            self._step.finish(ok)
            self._step = None


def prepare_guest(preload: tuple[str, ...], *, precompile: bool) -> Any:
    """The one-time work before a guest starts (runtime/startup.prepare_start), each
    step drawn on stderr while it runs; the warm image, or None."""
    from ..runtime.startup import StartupProgress, prepare_start

    progress = StartupProgress(TerminalSteps())
    image = prepare_start(preload, progress, precompile=precompile)
    for line in progress.notes:
        print(f"wasm-kernel: {line}", file=sys.stderr)
    return image


@contextmanager
def warmup_turn() -> Iterator[None]:
    """Hold the background warm-up's lock for the body, so that no warm-up process
    compiles the same module beside it. If one is running, wait for it, showing what
    it does (its status file) and for how long: what it builds, the body then finds done."""
    from ..runtime.background_warmup import warmup_lock, warmup_status

    waiting: Step | None = None
    try:
        while True:
            with warmup_lock(wait=False) as held:
                if held:
                    if waiting is not None:
                        waiting.finish()
                        waiting = None
                    yield
                    return
            status = warmup_status()
            if status is not None:
                text = WAIT_WARMUP.format(pid=status.pid, step=status.step)
                if waiting is None:  # counted from when that process started
                    waiting = Step(text, running_for=max(0.0, time.time() - status.since))
                    waiting()
                waiting.describe(text)
            time.sleep(0.5)
    finally:
        if waiting is not None:
            waiting.finish(ok=False)


def background_note(printer: Any) -> None:
    """After a run: whether the background warm-up still works, at what, and for how long."""
    from ..runtime.background_warmup import warmup_status

    status = warmup_status()
    if status is None:
        return
    running = time.time() - status.since
    printer.line(f"wasm-kernel: the background warm-up (pid {status.pid}) is still {status.step}, {running:.0f} s "
                 "after it started (on the benchmarks' 2-core machine it ends 60-67 s after a first start); "
                 f"later runs start from what it builds (log: {status.log})", "stderr")
