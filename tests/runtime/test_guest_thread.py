"""GuestThread: one thread per guest; work handed to it from elsewhere is queued,
and a job already on it (a kernel's whole execute) calls the guest inline."""

import threading

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
