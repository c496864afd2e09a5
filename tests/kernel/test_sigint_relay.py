"""The kernel's SIGINTs are counted as they arrive and served off the signal handler:
a second interrupt that comes while the first one's work holds a lock (the soft
interrupt's, in the stop storm's hung kernel) does not run that work again inside it
on the main thread and wait there for ever; and two interrupts that come before the
main thread runs its handler are two (the second hardens an interrupt the cell
swallowed), not one."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from wasm_kernel.kernel.sigint_relay import SigintRelay


@pytest.fixture
def served() -> Iterator[tuple[list[str], threading.Lock, threading.Event]]:
    lock = threading.Lock()
    names: list[str] = []
    holding = threading.Event()

    def work() -> None:
        # The first interrupt's work takes the lock and holds it while the next come.
        with lock:
            names.append(threading.current_thread().name)
            if len(names) == 1:
                holding.set()
                time.sleep(0.3)

    woken: list[float] = []
    relay = SigintRelay(work, logging.getLogger("test"), lambda: woken.append(time.monotonic()))
    relay.arm()
    previous = signal.signal(signal.SIGINT, relay.handler)
    try:
        assert relay.counts_deliveries  # nothing else set a wake-up fd in this process
        yield names, lock, holding
        assert woken, "the main thread's loop was never woken"
    finally:
        signal.signal(signal.SIGINT, previous)
        relay.close()


def _wait_for(names: list[str], count: int) -> None:
    deadline = time.monotonic() + 5
    while len(names) < count and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_second_interrupt_while_the_first_ones_work_holds_its_lock_neither_hangs_nor_is_lost(
    served: tuple[list[str], threading.Lock, threading.Event],
) -> None:
    names, lock, holding = served
    os.kill(os.getpid(), signal.SIGINT)
    assert holding.wait(5), "the first interrupt was never served"
    os.kill(os.getpid(), signal.SIGINT)  # its Python handler runs here, on the main thread
    for _ in range(1000):  # bytecodes: the handler has had its turn
        pass
    # The main thread is past its handler while the first work still holds the lock:
    # it never waited for it (order, not a time).
    assert lock.locked() and names == ["wasm-kernel-sigint"]
    _wait_for(names, 2)
    assert names == ["wasm-kernel-sigint", "wasm-kernel-sigint"]


def test_interrupts_that_come_before_the_handler_runs_are_each_served(
    served: tuple[list[str], threading.Lock, threading.Event],
) -> None:
    names, _, _ = served

    # From another process, as a kernel's interrupts come (jupyter_client's kill), while
    # the main thread is in a C loop that never looks at signals (as it may be in the
    # kernel when a Python handler is owed): its Python handler runs once for all three.
    pid = os.getpid()
    sender = subprocess.Popen(["sh", "-c", f"for i in 1 2 3; do kill -INT {pid}; sleep 0.05; done"])
    while sender.poll() is None:
        sum(range(20_000_000))
    _wait_for(names, 3)
    time.sleep(0.1)
    assert len(names) == 3, names


def test_an_interrupt_between_cells_is_not_served(served: tuple[list[str], threading.Lock, threading.Event]) -> None:
    names, _, _ = served
    relay_handler = signal.getsignal(signal.SIGINT)
    relay = relay_handler.__self__  # type: ignore[union-attr]
    relay.disarm()
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.2)
    assert names == []
    relay.arm()
    os.kill(os.getpid(), signal.SIGINT)
    _wait_for(names, 1)
    assert len(names) == 1


def test_an_interrupt_sent_to_one_request_never_lands_in_the_next() -> None:
    # A comm handler's second interrupt, not yet served as the handler ended, raised
    # KeyboardInterrupt in the cell after it (the stop storm's comm_frontend mismatch).
    request = ["A"]
    served: list[str] = []
    holding = threading.Event()

    def work() -> None:
        served.append(request[0])
        if len(served) == 1:
            holding.set()
            time.sleep(0.3)  # the first is being served while the second comes

    relay = SigintRelay(work, logging.getLogger("test"), lambda: None)
    relay.arm()
    previous = signal.signal(signal.SIGINT, relay.handler)
    try:
        for _ in range(20):
            served.clear()
            holding.clear()
            request[0] = "A"
            os.kill(os.getpid(), signal.SIGINT)
            assert holding.wait(5)
            os.kill(os.getpid(), signal.SIGINT)
            relay.disarm()  # request A ends: its second interrupt is served in it, or dropped
            request[0] = "B"
            relay.arm()  # request B
            time.sleep(0.05)
            relay.disarm()
            relay.arm()
            assert "B" not in served, served
    finally:
        signal.signal(signal.SIGINT, previous)
        relay.close()
