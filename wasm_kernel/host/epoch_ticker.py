"""Advances the engine's epoch every TICK_SECONDS, only while some guest needs it.

Each store has an epoch-deadline callback that decides, at every tick, whether its
own guest goes on or stops (interrupt, wall-clock deadline) and hands over
pending output. A guest needs ticks only while it has a deadline, a pending
interrupt or unsent output (the ticker looks every tick while a turn runs);
otherwise its wasm runs with no callbacks at all,
which also keeps fuel counts exact (the epoch check's slow path costs a few units
of fuel). The epoch is the engine's, so while one guest needs ticks, every guest
running at that moment sees them: only then can fuel differ, by ~20 per tick.

A guest on an engine without epochs (host/thread_stop.py) gives an `on_tick` of its
own: the ticker calls it on its thread at every tick the guest needs, and the guest
does there what its epoch callback would (hand over output, see a stop is due).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import wasmtime

from .log import get_logger

log = get_logger("wasm_kernel.host")

TICK_SECONDS = 0.01

NeedsTicks = Callable[[], bool]
OnTick = Callable[[], None]


class EpochTicker:
    def __init__(self, engine: wasmtime.Engine) -> None:
        self._engine = engine
        self._running: dict[int, tuple[NeedsTicks, OnTick | None]] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def enter(self, key: int, needs_ticks: NeedsTicks, on_tick: OnTick | None = None) -> None:
        """A turn starts; `needs_ticks()` says whether it wants the clock now, and
        `on_tick()`, if given, is called at each tick it wants."""
        with self._cond:
            self._running[key] = (needs_ticks, on_tick)
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

    def _wanted(self) -> list[OnTick | None]:
        return [on_tick for needs, on_tick in list(self._running.values()) if needs()]

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._running:
                    self._cond.wait()
                # While a turn runs, look every tick: a guest's needs can change
                # without a call to wake() (output waiting in its stream ring).
                self._cond.wait(TICK_SECONDS)
                wanted = self._wanted()
                if not wanted:
                    continue  # nothing needs the clock: no tick, exact fuel counts
            self._engine.increment_epoch()
            for on_tick in wanted:
                if on_tick is not None:
                    try:
                        on_tick()
                    except Exception as err:  # one guest's failure must not stop every guest's clock
                        log.error("epoch_ticker.on_tick_failed", error=str(err))


_tickers: dict[int, EpochTicker] = {}
_lock = threading.Lock()


def ticker_for(engine: wasmtime.Engine) -> EpochTicker:
    with _lock:
        if id(engine) not in _tickers:
            _tickers[id(engine)] = EpochTicker(engine)
        return _tickers[id(engine)]
