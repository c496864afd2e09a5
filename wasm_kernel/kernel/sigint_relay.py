"""A kernel's interrupts, counted as they arrive and served off the signal handler.

Two faults of doing the work in a Python signal handler, both found by the stop storm:
- CPython runs a Python handler on the main thread between two bytecodes of whatever
  that thread was doing, the handler itself included. A second SIGINT that came while
  the first one's handler held a lock (the soft interrupt's, writing the guest's
  interrupt words) ran the handler again inside the first, and the second waited for
  that lock for ever.
- Two SIGINTs that come before the main thread gets to its handler run it once: the
  second, which hardens an interrupt the cell swallowed, was lost, and the cell ran
  on (two interrupts 1 ms apart, on a cell looping in a comm handler).

So CPython's C-level handler, which writes one byte per signal it receives to the
wake-up fd (`signal.set_wakeup_fd`), is the count: one thread of ours reads those bytes
and does the work once per SIGINT, in order, while the relay is armed (a cell runs);
the Python-level handler does nothing. After each batch it wakes the main thread's loop,
so the Python handlers of other signals (SIGTERM's) run at once rather than at the
loop's next event. Where another wake-up fd is set already (not ours to replace), the
Python handler writes the bytes itself instead: the lock problem is still solved, and
coalesced signals are what they are there.
"""

from __future__ import annotations

import logging
import select
import signal
import socket
import threading
from collections.abc import Callable
from typing import Any


class SigintRelay:
    """Install `handler` for SIGINT while a cell runs, between arm() and disarm();
    `work` runs on the relay's thread once per SIGINT received meanwhile (never
    after disarm() returned); `wake`
    (thread-safe) wakes the main thread's loop. Make it on the main thread."""

    def __init__(self, work: Callable[[], None], log: logging.Logger | Any, wake: Callable[[], None]) -> None:
        self._work, self._log, self._wake = work, log, wake
        self._reader, self._writer = socket.socketpair()
        self._writer.setblocking(False)  # a full buffer drops a byte, never blocks a handler
        self.armed = False
        self._lock = threading.Lock()  # armed, and the work done while it is
        previous = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        self.counts_deliveries = previous == -1
        if not self.counts_deliveries:
            signal.set_wakeup_fd(previous, warn_on_full_buffer=False)  # someone else's: left as it was
        self._thread = threading.Thread(target=self._run, name="wasm-kernel-sigint", daemon=True)
        self._thread.start()

    def handler(self, signum: int, frame: Any) -> None:
        """The Python-level SIGINT handler: nothing when the C handler's bytes are the
        count, else one byte of its own."""
        if not self.counts_deliveries:
            try:
                self._writer.send(bytes([signal.SIGINT]))
            except OSError:  # a full buffer (thousands unserved) or a closed relay
                pass

    def arm(self) -> None:
        with self._lock:
            self.armed = True

    def disarm(self) -> None:
        """The request ended: what it was sent and not yet served goes with it, so that
        it never lands in the next request (a comm handler's late second interrupt
        raised KeyboardInterrupt in the cell after it). Waits for work under way."""
        with self._lock:
            self.armed = False
            try:
                while self._reader.recv(256, socket.MSG_DONTWAIT):
                    pass
            except OSError:  # BlockingIOError: nothing left
                pass

    def _run(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self._reader], [], [])
            except (OSError, ValueError):  # closed
                return
            if not ready:
                continue
            # Read and served under the lock disarm() takes: a byte is either served
            # while its request is armed or dropped by disarm(), never carried over.
            with self._lock:
                try:
                    got = self._reader.recv(256, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    continue  # disarm() drained it
                except OSError:
                    return
                if not got:
                    return
                for byte in got:
                    if byte != signal.SIGINT or not self.armed:
                        continue  # another signal's byte, or between requests (ipykernel ignores those)
                    try:
                        self._work()
                    except Exception:  # an interrupt that failed must not end the relay
                        self._log.exception("wasm-kernel: handling an interrupt failed")
            try:
                self._wake()
            except Exception:  # the loop closed: the kernel is ending
                pass

    def close(self) -> None:
        """Give the wake-up fd back and end the relay's thread."""
        if self.counts_deliveries and threading.current_thread() is threading.main_thread():
            previous = signal.set_wakeup_fd(-1)
            if previous != self._writer.fileno():
                signal.set_wakeup_fd(previous, warn_on_full_buffer=False)  # replaced since: not ours
        self._writer.close()
        self._thread.join(timeout=1.0)
        self._reader.close()


__all__ = ["SigintRelay"]
