"""The interrupts of the shell request being handled, and the boundary they never cross.

An interrupt comes on the control thread (interrupt_request) or the SIGINT relay's
thread, while the request it is meant for runs on the event loop. It may come before
the request's guest turn has started (behind the last turn's checkpoint, or a
compaction after a stop that grew the memory), so it is retried until the turn takes
it, for as long as that same request runs.

Every call into the sandbox for an interrupt, the retried ones included, is made
under one lock that the request's end also takes, and only after checking, under that
lock, that the request and its turn still run. A retry that checked first and called
after (the stop storm's last fault: one in 10,000 stops, a comm handler's late second
interrupt raised KeyboardInterrupt in the next cell) could land in the next request
whenever its thread was descheduled between the two. Now the request cannot end while
such a call is under way, and a call after its end finds nothing to do.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

RETRY_SECONDS = 0.005  # between two tries to reach a turn that has not started yet


class Interruptible(Protocol):
    def interrupt(self) -> bool:
        """Interrupt the running turn; True if one was running."""
        ...


class RequestInterrupts:
    """What an interrupt does to the request being handled. `sandbox` returns the
    session's sandbox (None until it is open); `events` are set by every interrupt of
    the request and cleared as the next begins (the cell's "interrupted" flag, the
    input wait's cancel)."""

    def __init__(self, sandbox: Callable[[], Interruptible | None], *events: threading.Event) -> None:
        self._sandbox = sandbox
        self._events = events
        self._lock = threading.Lock()
        self._in_request = False  # between the handler hooks
        self._running = False  # a guest turn runs for the request being handled
        self._turns = 0  # counts turns and request ends: a retry belongs to one turn

    def begin_request(self) -> None:
        with self._lock:
            for event in self._events:
                event.clear()
            self._in_request = True

    def end_request(self) -> None:
        """The request is done: an interrupt call under way finishes first, and none
        made for it happens after this returns."""
        with self._lock:
            self._in_request = False
            self._turns += 1

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Around a guest turn the request runs (a cell, a comm handler)."""
        with self._lock:
            self._running = True
            self._turns += 1
        try:
            yield
        finally:
            with self._lock:
                self._running = False

    def interrupt(self) -> None:
        """Interrupt the request being handled, if any (between requests there is
        nothing to interrupt, as with ipykernel's SIGINT): its flags are set, and the
        guest's turn is stopped now or, if it has not started, as soon as it does."""
        with self._lock:
            if not self._in_request:
                return
            self._interrupt_locked()

    def stop(self) -> None:
        """A shutdown's stop (SIGTERM, the server gone): whatever runs, request or not."""
        with self._lock:
            self._interrupt_locked()

    def _interrupt_locked(self) -> None:
        for event in self._events:
            event.set()
        sandbox = self._sandbox()
        if sandbox is not None and self._running and not sandbox.interrupt():
            # The request is between steps or its turn is about to start.
            threading.Thread(target=self._retry, args=(self._turns,), name="wasm-kernel-interrupt",
                             daemon=True).start()

    def _retry(self, turn: int) -> None:
        while True:
            with self._lock:
                if not (self._in_request and self._running and self._turns == turn):
                    return  # the turn or the request ended: the interrupt went with it
                sandbox = self._sandbox()
                if sandbox is not None and sandbox.interrupt():
                    return
            time.sleep(RETRY_SECONDS)


__all__ = ["Interruptible", "RequestInterrupts"]
