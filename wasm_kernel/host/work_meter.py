"""How far one piece of a first start's work has got, measured, not guessed.

None of the one-time work (the guest's compile, IPython's bytecode, the warm image)
says how far it got. What can be measured is the CPU time this process has spent on
it: it grows only while the work runs, however loaded the machine is. So a step's
progress is its CPU time against what the same step cost when it last ran here
(recorded in the cache, `work-costs.json`), or, before it ever ran here, what it cost
on the benchmarks' 2-core machine. Its time left is the CPU still to do at the rate
the process got over the last few seconds. On a loaded machine the figure moves
slowly and the time left grows, instead of a clock reaching 99% and sitting there.
When a step ends, its cost is recorded for the next one.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from .cache_dir import cache_root
from .log import get_logger

log = get_logger("wasm_kernel.host")

COSTS_FILE = "work-costs.json"
# CPU seconds and wall seconds of each step on the benchmarks' 2-core machine
# (measured 2026-12-02: the baseline compile 12.8 s of CPU, the optimized one 114 s of
# CPU in 60 s; BENCHMARKS.md, "First start"), used until the step has run here.
DEFAULT_COSTS: dict[str, tuple[float, float]] = {
    "compile-baseline": (12.8, 11.0),
    "compile-optimized": (114.0, 60.0),
    "site-bytecode": (3.0, 3.0),
    "warm-image": (6.0, 6.0),
}
_RATE_WINDOW_S = 3.0  # the CPU rate is taken over this much of the recent past
_MAX_COST_S = 3600.0  # a recorded cost beyond this (or not a number) is not believed
_STEP_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
_MAX_STEPS = 32  # the file never grows past this many steps
_lock = threading.Lock()
T = TypeVar("T")


@dataclass(frozen=True)
class WorkProgress:
    """One reading of a step: wall seconds since it started, the fraction of its
    measured cost done (never 1 before it ends), and the seconds left at the recent
    CPU rate, or None when that cannot be said (too early, or past the cost)."""

    elapsed: float
    fraction: float
    seconds_left: float | None
    done: bool = False

    @property
    def percent(self) -> int:
        return 100 if self.done else min(99, int(100 * self.fraction))

    def left_text(self) -> str:
        """"about 8 s left", or "still working" when no time left can be said."""
        if self.seconds_left is None:
            return "still working"
        left = self.seconds_left
        return f"about {left:.0f} s left" if left < 90 else f"about {left / 60:.0f} min left"

    def text(self) -> str:
        """The reading in one phrase: "45% after 6 s, about 8 s left"."""
        return f"{self.percent}% after {self.elapsed:.0f} s, {self.left_text()}"


Progress = Callable[[WorkProgress], None]


class WorkMeter:
    """Reads one step's progress from this process's CPU clock. Its cost (CPU seconds)
    and expected_wall (the wall time shown before a rate is measured) are what the
    step took when it last ran here, else on the benchmarks' machine."""

    def __init__(self, step: str) -> None:
        self.step = step
        self.cost, self.expected_wall = _costs().get(step) or DEFAULT_COSTS.get(step, (1.0, 1.0))
        self._cpu = time.process_time
        self._start_wall = time.monotonic()
        self._start_cpu = self._cpu()
        self._recent: deque[tuple[float, float]] = deque([(self._start_wall, self._start_cpu)])

    def read(self) -> WorkProgress:
        now, cpu = time.monotonic(), self._cpu()
        self._recent.append((now, cpu))
        while len(self._recent) > 2 and now - self._recent[1][0] >= _RATE_WINDOW_S:
            self._recent.popleft()
        used = cpu - self._start_cpu
        elapsed = now - self._start_wall
        fraction = min(0.99, used / self.cost) if self.cost > 0 else 0.0
        then, then_cpu = self._recent[0]
        left: float | None = None
        if used < self.cost and now - then >= 1.0:
            rate = (cpu - then_cpu) / (now - then)
            if rate > 0.01:
                left = (self.cost - used) / rate
        elif used < self.cost and elapsed < 1.0:
            left = max(0.0, self.expected_wall - elapsed)
        return WorkProgress(elapsed, fraction, left)

    def finish(self) -> WorkProgress:
        """The step ended: its cost on this machine is recorded for the next time."""
        elapsed = time.monotonic() - self._start_wall
        used = self._cpu() - self._start_cpu
        if used > 0.05:
            _record(self.step, used, elapsed)
        return WorkProgress(elapsed, 1.0, 0.0, done=True)


class CountedWork:
    """Progress of work that counts its own items (the files a site's staging copies),
    told to `progress` at most every `every` seconds: the fraction of the items done,
    and the time left at the pace so far. It moves as items are done, whatever their
    cost is in CPU time (copying files mostly waits for the disk)."""

    def __init__(self, total: int, progress: Progress | None, every: float = 0.25) -> None:
        self.total, self.done = max(1, total), 0
        self._progress, self._every = progress, every
        self._start = time.monotonic()
        self._told = -every
        self._tell()

    def advance(self, items: int = 1) -> None:
        self.done += items
        if self._progress is not None and time.monotonic() - self._told >= self._every:
            self._tell()

    def finish(self) -> None:
        if self._progress is not None:
            self._progress(WorkProgress(time.monotonic() - self._start, 1.0, 0.0, done=True))

    def _tell(self) -> None:
        if self._progress is None:
            return
        now = time.monotonic()
        self._told = now
        elapsed = now - self._start
        fraction = min(0.99, self.done / self.total)
        left = elapsed * (self.total - self.done) / self.done if self.done else None
        self._progress(WorkProgress(elapsed, fraction, left))


def metered(step: str, work: Callable[[], T], progress: Progress | None, every: float = 0.5) -> T:
    """Run `work`, telling `progress` how far it got every `every` seconds from a side
    thread (the work is one blocking call), and once more when it ends."""
    if progress is None:
        return work()
    meter = WorkMeter(step)
    progress(meter.read())
    done = threading.Event()

    def tick() -> None:
        while not done.wait(every):
            progress(meter.read())

    ticker = threading.Thread(target=tick, name="wasm-kernel-work-progress", daemon=True)
    ticker.start()
    ok = False
    try:
        result = work()
        ok = True
        return result
    finally:
        done.set()
        ticker.join()
        if ok:
            progress(meter.finish())


def _costs_path() -> Path:
    return cache_root() / COSTS_FILE


def _costs() -> dict[str, tuple[float, float]]:
    """The recorded costs; anything in the file that is not a step's two sane numbers
    is ignored (the file is ours, but a cache is never trusted to be well formed)."""
    try:
        raw = json.loads(_costs_path().read_text())
    except (OSError, ValueError):
        return {}
    costs: dict[str, tuple[float, float]] = {}
    if isinstance(raw, dict):
        for step, value in raw.items():
            if (isinstance(step, str) and _STEP_NAME.fullmatch(step) and isinstance(value, list) and len(value) == 2
                    and all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= _MAX_COST_S
                            for v in value)):
                costs[step] = (float(value[0]), float(value[1]))
    return costs


def _record(step: str, cpu_seconds: float, wall_seconds: float) -> None:
    if not _STEP_NAME.fullmatch(step) or not (0 < cpu_seconds <= _MAX_COST_S):
        return
    with _lock:
        costs = {name: list(value) for name, value in _costs().items()}
        if step not in costs and len(costs) >= _MAX_STEPS:
            return
        costs[step] = [round(cpu_seconds, 2), round(min(max(wall_seconds, 0.01), _MAX_COST_S), 2)]
        path = _costs_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(prefix=".work-costs-", dir=path.parent)
            with os.fdopen(fd, "w") as f:
                json.dump(costs, f)
            os.replace(tmp, path)
        except OSError as err:  # only the next estimate is less good
            log.warning("work_meter.unwritable", error=str(err))
