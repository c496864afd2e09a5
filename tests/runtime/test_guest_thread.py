"""GuestThread: one thread per guest; work handed to it from elsewhere is queued,
a job already on it (a kernel's whole execute) calls the guest inline, and work
handed to a stopped one fails at once."""

import threading

import pytest

from wasm_kernel.runtime.guest_config import GuestUnavailable
from wasm_kernel.runtime.guest_thread import GuestThread


def test_a_job_on_the_thread_calls_it_inline_instead_of_waiting_for_itself() -> None:
    thread = GuestThread("test-guest")
    try:
        def inner() -> str:
            return threading.current_thread().name

        def outer() -> tuple[str, str]:
            return threading.current_thread().name, thread.call(inner)  # queued, this would never return

        future = thread.submit(outer)
        assert future.result(timeout=10) == ("test-guest", "test-guest")
        assert thread.call(inner) == "test-guest"  # from elsewhere: queued, run there
    finally:
        thread.stop()


def test_work_handed_to_a_stopped_thread_fails_at_once_instead_of_waiting_for_ever() -> None:
    thread = GuestThread("test-guest")
    thread.stop()
    future = thread.submit(lambda: 1)
    with pytest.raises(GuestUnavailable, match="closed"):
        future.result(timeout=10)
    with pytest.raises(GuestUnavailable):
        thread.call(lambda: 1)
