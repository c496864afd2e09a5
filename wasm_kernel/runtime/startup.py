"""The one start-up path: the one-time work a machine does before its first shell guest
(compile the guest, stage IPython's site and its bytecode, build the warm image), the
same for the kernel, `wasm-kernel run`, `precompile` and `grade`, each step told to
one StartupProgress. A first start on a machine compiles the baseline module in
seconds and leaves the optimized one to the background warm-up
(background_warmup.py); `precompile` does all of it now.

The work reports readings (host/work_meter.WorkProgress: how far, and the time left);
StartupProgress keeps the current step and its latest reading, which the kernel shows
in the waiting cell, and tells a view, which the CLI draws in the terminal
(cli/progress.py). Each step's words are said here, once.

The kernel's other start-up checks, those that need no session, run in `preflight`
from its first moment, so the kernel never reaches into the host for them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from ..host.engine import get_engine
from ..host.guest_site import is_site_staged
from ..host.memory_image import MemoryImage
from ..host.module_cache import is_guest_cached, load_guest_module, read_cached_guest
from ..host.thread_stop import start_probe
from ..host.wasi_shim import shim_module
from .background_warmup import baseline_allowed
from .guest_site_build import BYTECODE_MARKER, add_bytecode, guest_site
from .provisioning import drop_baseline_module, is_warm_image_ready, prepare_warm_image
from .warm_image import ImageBusy, ImageUnavailable

# What each step does, in the notebook's waiting cell and in the terminal alike.
BASELINE = ("Compiling the Python guest for this machine, quickly (first start only; "
            "the optimised build follows in the background)")
OPTIMISED = "Compiling the optimised Python guest for this machine (once per version)"
SITE_FILES = "Staging IPython for the guest (first start only)"
SITE = "Preparing IPython for the guest: its files and bytecode (once per version)"
IMAGE = "Building the warm image: IPython, {modules}, imported once"
BOOT = "Starting the Python guest without a warm image (it imports IPython)"


class Reading(Protocol):
    """What a step reports: WorkProgress, or another step's own (the course's pip line)."""

    done: bool

    def text(self) -> str: ...


Report = Callable[[Any], None]  # a step's progress callback: a Reading, or None to say it started


class StartupView(Protocol):
    """Who draws the steps as they run (the CLI's terminal lines)."""

    def started(self, what: str) -> None: ...
    def reading(self, reading: Reading) -> None: ...
    def finished(self, ok: bool) -> None: ...


@dataclass(frozen=True)
class StepReading:
    what: str
    reading: Reading


class StartupProgress:
    """The one reporter of the start-up's steps. A step that has nothing to do (done
    before, on this machine or in this process) never reports, and is never shown."""

    def __init__(self, view: StartupView | None = None) -> None:
        self._view = view
        self._lock = threading.Lock()
        self._current: StepReading | None = None
        self.notes: list[str] = []  # lines the user should read once the start is over

    @contextmanager
    def step(self, what: str) -> Iterator[Report]:
        """A step of the work: the body runs it, reporting through the callback."""
        started = False

        def report(reading: Reading | None = None) -> None:
            nonlocal started
            if not started:
                started = True
                if self._view is not None:
                    self._view.started(what)
            if reading is None:
                return
            with self._lock:
                self._current = None if reading.done else StepReading(what, reading)
            if self._view is not None and not reading.done:
                self._view.reading(reading)

        ok = False
        try:
            yield report
            ok = True
        finally:
            with self._lock:
                self._current = None
            if started and self._view is not None:
                self._view.finished(ok)

    def current(self) -> StepReading | None:
        """The running step and its latest reading, if one has come."""
        with self._lock:
            return self._current

    def note(self, line: str) -> None:
        self.notes.append(line)


def prepare_start(preload: tuple[str, ...], progress: StartupProgress, *, precompile: bool = False,
                  warm_image: bool = True, more: Sequence[tuple[str, Callable[[Report], None]]] = ()
                  ) -> MemoryImage | None:
    """The one-time work before a shell guest starts; the warm image, or None.

    precompile=False (a kernel's or a run's start): on a first start, the baseline
    compile and IPython's files only (a guest then starts the background warm-up for
    the rest); later, the warm image if it can be had without waiting for another
    process's build. precompile=True: the optimized compile, the bytecode and the
    image, all now, waiting for the image (the caller holds the warm-up's lock).
    more: the caller's own steps (the kernel's course environment), after the site and
    before the image, whose key holds them. warm_image=False: no image step."""
    if not is_guest_cached() and not precompile and baseline_allowed():
        with progress.step(BASELINE) as report:
            load_guest_module(report, baseline=True)
        with progress.step(SITE_FILES) as report:
            guest_site(report, bytecode=False)  # it counts the files it copies
        _more(progress, more)
        return None
    with progress.step(OPTIMISED) as report:
        load_guest_module(report)
    drop_baseline_module()  # replaced by the optimized module: no guest starts on it again
    with progress.step(SITE) as report:
        guest_site(report)
        if precompile:  # a start leaves a first start's missing bytecode to the background warm-up
            add_bytecode(report)
    _more(progress, more)
    if not warm_image:
        return None
    with progress.step(IMAGE.format(modules=", ".join(preload) or "no modules")) as report:
        try:
            return prepare_warm_image(preload, report, wait=precompile)
        except ImageBusy:  # the background warm-up builds it: this start goes without it
            return None
        except ImageUnavailable as err:
            progress.note(f"the warm image could not be built ({err}); sandboxes start without it, more slowly")
            return None


def is_start_prepared(preload: tuple[str, ...]) -> bool:
    """Whether precompile has nothing left to do: the optimized guest compiled, the
    site staged with its bytecode, the warm image of `preload` built."""
    return (is_guest_cached() and is_site_staged() and (guest_site().path / BYTECODE_MARKER).is_file()
            and is_warm_image_ready(preload))


def _more(progress: StartupProgress, more: Sequence[tuple[str, Callable[[Report], None]]]) -> None:
    for what, work in more:
        with progress.step(what) as report:
            work(report)


class Preflight(threading.Thread):
    """The start-up checks that need no session, on a thread of their own from the
    kernel's first moment: the stops probe (a forked child: how cells are stopped
    decides the engine), whether the guest's site is staged, the compiled guest and
    the WASI shim read from the cache (memoised; ~6 ms, mostly inside wasmtime with
    the GIL released), and whether the warm image of `preload` is built. It never
    compiles, stages or builds: what is missing is prepare_start's, which shows its
    progress; a failure here is only a "not ready", found again there."""

    def __init__(self, preload: tuple[str, ...]) -> None:
        super().__init__(name="wasm-kernel-preflight", daemon=True)
        self.preload = preload
        self.image_ready = False
        self.start()

    def run(self) -> None:
        start_probe()
        try:
            site_staged = is_site_staged()
            if read_cached_guest():  # never a compile here (a first start's, a refused file's)
                shim_module(get_engine())
                # The image's key holds the staged site's: asked only once it is staged.
                self.image_ready = site_staged and is_warm_image_ready(self.preload)
        except Exception:
            pass


__all__ = ["BASELINE", "BOOT", "IMAGE", "OPTIMISED", "Preflight", "SITE", "SITE_FILES", "StartupProgress",
           "StepReading", "is_start_prepared", "prepare_start"]
