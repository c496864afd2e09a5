"""Advances the engine's epoch every TICK_SECONDS while any guest is running.

Each store has an epoch-deadline callback that decides, at every tick, whether its
own guest goes on or stops (interrupt, wall-clock deadline). The ticker runs only
while at least one turn is active, so idle kernels cost no wakeups.
"""

from __future__ import annotations

import threading

import wasmtime

TICK_SECONDS = 0.01


class EpochTicker:
    def __init__(self, engine: wasmtime.Engine) -> None:
        self._engine = engine
        self._active = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> EpochTicker:
        with self._cond:
            self._active += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="wasm-kernel-epoch", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._active -= 1

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._active == 0:
                    self._cond.wait()
                # wait_for a short timeout doubles as the tick sleep
                self._cond.wait(TICK_SECONDS)
            self._engine.increment_epoch()


_tickers: dict[int, EpochTicker] = {}
_lock = threading.Lock()


def ticker_for(engine: wasmtime.Engine) -> EpochTicker:
    with _lock:
        if id(engine) not in _tickers:
            _tickers[id(engine)] = EpochTicker(engine)
        return _tickers[id(engine)]
