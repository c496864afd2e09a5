"""Advances the engine's epoch every TICK_SECONDS, only while some guest needs it.

Each store has an epoch-deadline callback that decides, at every tick, whether its
own guest goes on or stops (interrupt, wall-clock deadline) and hands over
pending output. A guest needs ticks only while it has a deadline, a pending
interrupt or unsent output (the ticker looks every tick while a turn runs);
otherwise its wasm runs with no callbacks at all,
which also keeps fuel counts exact (the epoch check's slow path costs a few units
of fuel). The epoch is the engine's, so while one guest needs ticks, every guest
running at that moment sees them: only then can fuel differ, by ~20 per tick.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import wasmtime

TICK_SECONDS = 0.01

NeedsTicks = Callable[[], bool]


class EpochTicker:
    def __init__(self, engine: wasmtime.Engine) -> None:
        self._engine = engine
        self._running: dict[int, NeedsTicks] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def enter(self, key: int, needs_ticks: NeedsTicks) -> None:
        """A turn starts; `needs_ticks()` says whether it wants the clock now."""
        with self._cond:
            self._running[key] = needs_ticks
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="wasm-kernel-epoch", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def leave(self, key: int) -> None:
        with self._cond:
            self._running.pop(key, None)

    def wake(self) -> None:
        """A running guest's needs changed (an interrupt, new output)."""
        with self._cond:
            self._cond.notify_all()

    def _wanted(self) -> bool:
        return any(needs() for needs in list(self._running.values()))

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._running:
                    self._cond.wait()
                # While a turn runs, look every tick: a guest's needs can change
                # without a call to wake() (output waiting in its stream ring).
                self._cond.wait(TICK_SECONDS)
                if not self._wanted():
                    continue  # nothing needs the clock: no tick, exact fuel counts
            self._engine.increment_epoch()


_tickers: dict[int, EpochTicker] = {}
_lock = threading.Lock()


def ticker_for(engine: wasmtime.Engine) -> EpochTicker:
    with _lock:
        if id(engine) not in _tickers:
            _tickers[id(engine)] = EpochTicker(engine)
        return _tickers[id(engine)]
