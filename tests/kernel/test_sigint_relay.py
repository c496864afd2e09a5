"""The kernel's SIGINT handler does no work of its own: a second interrupt that comes
while the first one's work holds a lock (the soft interrupt's, in the stop storm's hung
kernel) must not run that work again inside it, on the main thread, and wait there for
ever. The handler only hands each signal to the relay's thread, in order."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

from wasm_kernel.kernel.sigint_relay import SigintRelay


def test_a_second_interrupt_while_the_first_ones_work_holds_its_lock_neither_hangs_nor_is_lost() -> None:
    lock = threading.Lock()
    served: list[str] = []
    holding = threading.Event()

    def work() -> None:
        # The first interrupt's work takes the lock and holds it while the second comes.
        with lock:
            served.append(threading.current_thread().name)
            if len(served) == 1:
                holding.set()
                time.sleep(0.3)

    relay = SigintRelay(work, logging.getLogger("test"))
    previous = signal.signal(signal.SIGINT, relay.handler)
    try:
        os.kill(os.getpid(), signal.SIGINT)
        assert holding.wait(5), "the first interrupt was never served"
        started = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)  # its handler runs here, on the main thread
        for _ in range(1000):  # bytecodes: the handler has had its turn
            pass
        assert time.monotonic() - started < 0.2  # the main thread did not wait for the lock
        deadline = time.monotonic() + 5
        while len(served) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert served == ["wasm-kernel-sigint", "wasm-kernel-sigint"]
    finally:
        signal.signal(signal.SIGINT, previous)
        relay.close()
