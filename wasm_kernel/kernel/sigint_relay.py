"""An interrupt's work, done off the signal handler.

CPython runs a Python signal handler on the main thread between two bytecodes of
whatever that thread was doing, the handler itself included. So a second SIGINT that
came while the first one's handler held a lock (the soft interrupt's, writing the
guest's interrupt words) ran the handler again inside the first, and the second waited
for that lock for ever: the stop storm's hung kernel (a soft interrupt, then a hard
one 0.1 s later, on a numpy loop). The handler here only writes a byte to a pipe,
which is safe at any bytecode, and one thread of its own does the work, one interrupt
after the other, in the order they came.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any


class SigintRelay:
    """`handler` is the signal handler to install; `work` runs on the relay's thread,
    once per signal."""

    def __init__(self, work: Callable[[], None], log: logging.Logger | Any) -> None:
        self._work = work
        self._log = log
        self._reader, self._writer = os.pipe()
        os.set_blocking(self._writer, False)  # a full pipe drops a byte, never blocks the handler
        self._thread = threading.Thread(target=self._run, name="wasm-kernel-sigint", daemon=True)
        self._thread.start()

    def handler(self, signum: int, frame: Any) -> None:
        try:
            os.write(self._writer, b"\0")
        except OSError:  # full (64 KiB of interrupts not yet served) or closed: nothing more to say
            pass

    def _run(self) -> None:
        while True:
            try:
                got = os.read(self._reader, 64)
            except OSError:
                return
            if not got:
                return
            for _ in got:
                try:
                    self._work()
                except Exception:  # an interrupt that failed must not end the relay
                    self._log.exception("wasm-kernel: handling an interrupt failed")

    def close(self) -> None:
        """Stop the relay's thread (it ends as the pipe's write end closes)."""
        try:
            os.close(self._writer)
        except OSError:
            pass
        self._thread.join(timeout=1.0)
        try:
            os.close(self._reader)
        except OSError:
            pass


__all__ = ["SigintRelay"]
