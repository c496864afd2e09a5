"""Progress for the one-time work of a machine's first run, drawn on stderr so it never
mixes into a command's output: the guest's compile (the fast baseline one for a first
`run`, the optimised one for `precompile`), IPython's bytecode, the warm image, and
the optimised compile a first run leaves to a background process.

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

# What each step does. The runtime's progress readings say how far it got.
BASELINE = "Compiling the Python guest, baseline build (first run only)"
OPTIMISED = "Compiling the optimised Python guest (once per version)"
SITE = "Compiling IPython's bytecode for the guest"
SITE_FILES = "Staging IPython for the guest"
IMAGE = "Building the warm image: IPython, {modules}"
BOOT = "Starting the Python guest without a warm image (it imports IPython)"
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


def prepare_guest(preload: tuple[str, ...], *, precompile: bool) -> Any:
    """The one-time work before a guest starts, each step drawn while it runs.

    precompile=True: the optimised compile, IPython's bytecode and the warm image, all
    now (the caller holds the warm-up's lock: no background process works beside it).
    precompile=False (a run): what a kernel's start does. On a first run, the baseline
    compile and IPython's files only; the sandbox then starts the background warm-up
    for the rest. Later, the warm image if it can be had without waiting for another
    process building it. Returns the warm image, or None."""
    from ..host.guest_site import is_site_staged
    from ..host.module_cache import is_guest_cached, load_guest_module
    from ..runtime.background_warmup import baseline_allowed
    from ..runtime.guest_site_build import add_bytecode, guest_site
    from ..runtime.provisioning import drop_baseline_module, prepare_warm_image
    from ..runtime.warm_image import ImageBusy, ImageUnavailable

    cached = is_guest_cached()
    if not cached and not precompile and baseline_allowed():
        with step(BASELINE) as progress:
            load_guest_module(progress, baseline=True)
        if not is_site_staged():
            with step(SITE_FILES) as progress:
                guest_site(progress, bytecode=False)  # it counts the files it copies
        return None
    if not cached:
        with step(OPTIMISED) as progress:
            load_guest_module(progress)
    drop_baseline_module()  # replaced by the optimized module: no guest starts on it again
    with step(SITE) as progress:
        guest_site(progress)
        if precompile:  # a run leaves a first run's missing bytecode to the background warm-up
            add_bytecode(progress)
    with step(IMAGE.format(modules=", ".join(preload) or "no modules")) as progress:
        try:
            return prepare_warm_image(preload, progress, wait=precompile)
        except ImageBusy:  # the background warm-up builds it: this run starts without it
            return None
        except ImageUnavailable as err:
            print(f"wasm-kernel: the warm image could not be built ({err}); sandboxes start without it, "
                  "more slowly", file=sys.stderr)
            return None


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
