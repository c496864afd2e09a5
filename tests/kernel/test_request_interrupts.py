"""RequestInterrupts: an interrupt belongs to the request it was sent to.

The stop storm's last fault (issue 40, item 8): an interrupt retried for a turn that
had not started checked that its request still ran, then was descheduled, then called
the sandbox, by which time the next request's cell ran and took a KeyboardInterrupt.
These tests hold the retry between its check and its call and let the next request
try to start meanwhile. The sandbox here is a recorder of calls, since what is pinned
down is the order of calls across threads, which no real guest lets a test hold still;
the real kernel's side is tests/security/test_hard_stops_across_workloads.py and the
storm (benchmarks/stop_storm.py)."""

from __future__ import annotations

import threading

from wasm_kernel.kernel.request_interrupts import RequestInterrupts


class RecordingSandbox:
    """interrupt() says no turn runs until the test's phase is "next", when a turn
    (the next request's) does: a call then is an interrupt landing in the next cell."""

    def __init__(self) -> None:
        self.phase = "first"
        self.calls: list[str] = []

    def interrupt(self) -> bool:
        self.calls.append(self.phase)
        return self.phase == "next"


class HeldGetter:
    """The sandbox getter, held on its `hold_at`-th call until released: the moment
    between a retry's check and its call."""

    def __init__(self, sandbox: RecordingSandbox, hold_at: int) -> None:
        self.sandbox, self.hold_at, self.count = sandbox, hold_at, 0
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self) -> RecordingSandbox:
        self.count += 1
        if self.count == self.hold_at:
            self.entered.set()
            self.release.wait(10)
        return self.sandbox


def _retries_done() -> bool:
    return not any(t.name == "wasm-kernel-interrupt" and t.is_alive() for t in threading.enumerate())


def _wait_for_retries() -> None:
    done = threading.Event()
    for _ in range(2000):
        if _retries_done():
            return
        done.wait(0.005)
    raise AssertionError("an interrupt's retry thread never ended")


def test_a_retried_interrupt_never_lands_in_the_next_request() -> None:
    sandbox = RecordingSandbox()
    getter = HeldGetter(sandbox, hold_at=2)  # 1: the interrupt itself; 2: its first retry
    interrupts = RequestInterrupts(getter)
    interrupts.begin_request()
    first_turn = interrupts.turn()
    first_turn.__enter__()
    interrupts.interrupt()  # the turn has not started in the guest: retried
    assert getter.entered.wait(10), "the interrupt was not retried"

    def next_request() -> None:
        first_turn.__exit__(None, None, None)
        interrupts.end_request()
        sandbox.phase = "next"
        interrupts.begin_request()
        interrupts.turn().__enter__()

    starter = threading.Thread(target=next_request)
    starter.start()
    starter.join(0.5)  # without the lock the next request starts here, under the held retry
    getter.release.set()
    starter.join(10)
    assert not starter.is_alive()
    _wait_for_retries()
    assert "next" not in sandbox.calls, f"an interrupt reached the next request: {sandbox.calls}"


def test_an_interrupt_before_the_turn_starts_is_retried_until_it_lands() -> None:
    sandbox = RecordingSandbox()
    interrupts = RequestInterrupts(lambda: sandbox)
    interrupts.begin_request()
    with interrupts.turn():
        interrupts.interrupt()
        sandbox.phase = "next"  # the guest's turn starts now (same request)
        _wait_for_retries()
    assert sandbox.calls[-1] == "next"
    interrupts.end_request()


def test_an_interrupt_between_requests_does_nothing() -> None:
    sandbox = RecordingSandbox()
    flag = threading.Event()
    interrupts = RequestInterrupts(lambda: sandbox, flag)
    interrupts.interrupt()
    assert not flag.is_set() and sandbox.calls == []
    interrupts.begin_request()
    interrupts.interrupt()
    assert flag.is_set()
    interrupts.end_request()
    interrupts.begin_request()
    assert not flag.is_set(), "a request's interrupt flag was carried into the next"


def test_a_retry_ends_with_its_turn() -> None:
    sandbox = RecordingSandbox()
    interrupts = RequestInterrupts(lambda: sandbox)
    interrupts.begin_request()
    with interrupts.turn():
        interrupts.interrupt()
    _wait_for_retries()
    sandbox.phase = "next"
    with interrupts.turn():  # a later turn of the same request was not asked to stop
        pass
    assert "next" not in sandbox.calls
