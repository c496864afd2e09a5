"""One worker thread per guest, with a native stack big enough for wasm.

Every call into a guest's store happens on its own thread: wasmtime stores are not
thread-safe, the GIL is released while wasm runs (so guests in different threads use
different cores), and the thread that handles SIGINT is never the one running wasm.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from ..host.engine import GUEST_THREAD_STACK
from .guest_config import GuestUnavailable

T = TypeVar("T")
_stack_size_lock = threading.Lock()


class GuestThread:
    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], Future[Any]] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._stopped = False  # stop() was called: no job queued after it would ever run
        with _stack_size_lock:
            previous = threading.stack_size(GUEST_THREAD_STACK)
            try:
                self._thread = threading.Thread(target=self._run, name=name, daemon=True)
                self._thread.start()
            finally:
                threading.stack_size(previous)

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Queue fn(*args) for this thread (the Executor method, so asyncio's
        run_in_executor can hand work to it without a hop through another thread)."""
        future: Future[T] = Future()
        with self._lock:
            if self._stopped:  # a job queued behind the stop would wait for ever
                future.set_exception(GuestUnavailable("this sandbox is closed; create a new one"))
                return future
            self._jobs.put((fn, args, future))
        return future

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """fn(*args) on this thread. Called on this thread (a job that calls the guest,
        such as a kernel's whole execute), it runs at once: queued, it would wait for itself."""
        if threading.current_thread() is self._thread:
            return fn(*args)
        return self.submit(fn, *args).result()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._jobs.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, args, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as err:
                future.set_exception(err)
