"""What stops a turn: an interrupt (soft, raised in the cell's code, or hard), the
deadline, the CPU-time budget, and a fuel budget as time on an engine that counts no
fuel, checked by the epoch callback while the guest computes; and, once a turn has
trapped, which of them it was. The CPU time is the turn thread's own clock
(pthread_getcpuclockid), read from whichever thread asks.

On an engine without epochs (host/engine.epoch_free) there is no epoch callback: the
ticker's thread checks the same things at each tick (`tick`), and a stop that is due
makes the guest trap at its next memory access (host/thread_stop.py), from a thread
of its own. While the guest's memory is protected for that, nothing else may touch
it: every reader off the guest thread (the ticker's output hand-over, an
interrupting thread's words) holds the streams' `io_lock` or the soft interrupt's lock, and the
stop takes both. A guest holds one TurnStops; the door, the network door, the
shadows and children read the running turn's stops from it."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import wasmtime

from ..host.log import get_logger
from ..host.thread_stop import ThreadStopError, protect, stop_thread, wasm_code_ranges
from .guest_config import TrapReason, TurnLimits
from .guest_instance import GuestInstance
from .guest_streams import GuestStreams
from .soft_interrupt import SoftInterrupt
from .stream_ring import StreamRing

# Fuel a second of guest work burns on the optimized engine (measured 10-18e9/s for
# pure Python and numpy; the lower end): on the baseline engine, which counts no
# fuel, a cell's fuel budget is enforced as the time it buys there.
BASELINE_FUEL_PER_SECOND = 10e9
_THREAD_CPU_CLOCKS = hasattr(time, "pthread_getcpuclockid")
# A trap with memory this close to the limit is taken as the guest running out of it.
MEMORY_HEADROOM = 1 << 20
# How long a stop waits for the locks of other readers of guest memory before the
# tracer lets the guest run on a little and asks again.
PROTECT_WAIT_SECONDS = 0.05
# Stops by trap that fail in a row (ptrace refused after the probe allowed it): the
# guest cannot be stopped, so the process ends rather than run it unbounded.
STOP_FAILURES_FATAL = 3

log = get_logger("wasm_kernel.runtime")


class StopNow(BaseException):
    """Raised by a host call that finds its turn must stop, on an engine without epochs
    (there is no epoch check to meet on the way back). A BaseException, so that the
    doors' own error handling lets it through to wasmtime, which traps the guest."""


class TurnStops:
    """The stops of one guest's running turn."""

    def __init__(self, instance: GuestInstance, soft: SoftInterrupt, streams: GuestStreams) -> None:
        self.instance = instance
        self.soft = soft
        self.streams = streams
        self.running = False
        self.reason: TrapReason | None = None  # the stop the host asked for
        self.deadline_at: float | None = None
        self.fuel_deadline_at: float | None = None
        self.cpu_clock: int | None = None  # the turn thread's CPU clock, set as a turn starts
        self.cpu_started = 0.0
        self.cpu_deadline_at: float | None = None  # on that clock
        self.clock_stopped_at: float | None = None  # the wall clock stands still from then (an input wait)
        self._stop_lock = threading.Lock()
        self._turn_serial = 0
        self._turn_tid = 0  # the native id of the thread running the turn
        self._stopping = False  # a stop by trap runs for this turn
        self._protected: tuple[int, int] | None = None  # (base, size) of memory a stop made inaccessible

    def interrupt(self) -> bool:
        """Interrupt the running turn, if any, from any thread. True if one was running.

        With a grace (TurnLimits.interrupt_grace_seconds) the guest raises
        KeyboardInterrupt in the cell's code at its next safe point and the turn ends
        as a cell that raised, its work kept; one that has not taken it within the
        grace (a long call into compiled code) is stopped and rolled back, as every
        interrupt is without a grace."""
        if not self.running:
            return False
        # A turn that took a soft interrupt and still runs (it caught KeyboardInterrupt, or
        # its SIGINT handler ignores it; guest code may even fake the count) is stopped
        # the hard way by the next one: a notebook cannot make itself uninterruptible.
        if not self.soft.ask():
            self.reason = "interrupted"
            if not self.instance.epochs:
                self._hard_stop()
        self.instance.ticker.wake()
        return True

    def soft_interrupt_raised(self, store: Any) -> bool:
        """On the guest thread: raise a soft interrupt that is due; True while one is
        raised and not yet taken (see SoftInterrupt.raise_if_due)."""
        return self.soft.raise_if_due(store, self.instance.mem, self.instance.require_store)

    def interrupt_overdue(self) -> bool:
        if not self.soft.overdue():
            return False
        self.reason = "interrupted"
        return True

    def ask_for_work(self) -> bool:
        """From any thread: have the running guest take host work at its next safe
        point (SoftInterrupt.ask_for_work); the ticker is woken for the epoch
        callback that raises it where CPython's words are unknown."""
        asked = self.soft.ask_for_work()
        if asked and self.soft.work_pending:
            self.instance.ticker.wake()
        return asked

    def wait_for_person(self, done: Callable[[float], bool]) -> bool:
        """On the guest thread, in a host call: wait until done(timeout) is true (an
        input() reply, a debugger's next request). Waiting for a person is not
        compute: the deadline (and the baseline engine's time-based fuel budget)
        stand still meanwhile, as ipykernel has no such limit at all; the CPU budget
        does anyway (a blocked thread spends none). An interrupt or a stop ends the
        wait: False, and the turn then raises KeyboardInterrupt or stops."""
        waiting_since = self.clock_stopped_at = time.monotonic()  # the ticker's checks see it too
        try:
            while not done(0.02):
                if self.soft.take_for_input():
                    return False
                if self.reason is not None or self.interrupt_overdue():
                    self.stop_soon()
                    return False
            return True
        finally:
            waited = time.monotonic() - waiting_since
            if self.deadline_at is not None:
                self.deadline_at += waited
            if self.fuel_deadline_at is not None:
                self.fuel_deadline_at += waited
            self.clock_stopped_at = None  # after the deadlines moved: a check between sees neither pass

    def stop_soon(self) -> None:
        """Make the guest's next epoch check call the epoch callback, which stops it.
        Without epochs: from a host call on the guest's thread, raise StopNow (the
        guest traps as the call returns); from elsewhere, stop it by trap."""
        if self.instance.epochs:
            if self.instance.store is not None:
                self.instance.store.set_epoch_deadline(0)
        elif self.running and threading.get_native_id() == self._turn_tid:
            raise StopNow(self.reason or "interrupted")  # in a host call: trap right here
        else:
            self._hard_stop()

    def needs_ticks(self) -> bool:
        output = self.streams.output
        ring = self.streams.ring
        return (
            (ring is not None and self._ring_has_data(ring))
            or self.deadline_at is not None
            or self.fuel_deadline_at is not None
            or self.cpu_deadline_at is not None
            or self.reason is not None
            or self.soft.pending
            or self.soft.work_pending
            or (output is not None and output.has_pending)
        )

    def _ring_has_data(self, ring: StreamRing) -> bool:
        if self.instance.epochs:
            return ring.has_data()
        # Off the guest thread, memory a stop may have protected (it holds the lock while
        # it does): peek only under the lock.
        if not self.streams.io_lock.acquire(blocking=False):
            return True
        try:
            return ring.has_data()
        finally:
            self.streams.io_lock.release()

    def arm(self, limits: TurnLimits) -> None:
        """Set a starting turn's stops from its limits."""
        self.reason = None
        with self._stop_lock:
            self._turn_serial += 1
            self._turn_tid = threading.get_native_id()
            self._stopping = False
        # The interrupting thread writes the guest's interrupt words through this
        # turn's memory window (memory never moves while a turn runs).
        store = self.instance.store
        window = self.instance.mem.window(store) if self.soft.words is not None and store is not None else None
        grace = limits.interrupt_grace_seconds
        if not self.instance.epochs and self.soft.words is None:
            grace = None  # without epochs only the words raise a soft interrupt: every one is hard
        self.soft.begin_turn(grace, window)
        self.deadline_at = None if limits.deadline_seconds is None else time.monotonic() + limits.deadline_seconds
        self.fuel_deadline_at = None
        # arm runs on the turn's thread: its CPU clock is the one to read (where
        # the platform has no per-thread CPU clock, the monotonic clock stands in).
        self.cpu_clock = (time.pthread_getcpuclockid(threading.get_ident()) if _THREAD_CPU_CLOCKS
                           else time.CLOCK_MONOTONIC)
        self.cpu_started = time.clock_gettime(self.cpu_clock)
        self.cpu_deadline_at = None if limits.cpu_seconds is None else self.cpu_started + limits.cpu_seconds
        if not self.instance.counts_fuel and limits.fuel is not None:
            # An engine that counts no fuel (time metering, the baseline engine): a
            # fuel budget becomes the time it buys.
            self.fuel_deadline_at = time.monotonic() + limits.fuel / BASELINE_FUEL_PER_SECOND

    def disarm(self) -> None:
        """The turn's stops are handled: the calls that follow (a rollback's own shim
        calls, the next turn's set-up) must not be stopped too."""
        self.reason = None
        self.deadline_at = self.fuel_deadline_at = self.cpu_deadline_at = None

    def turn_cpu_seconds(self) -> float:
        """The CPU time the running (or last) turn's thread has used since it started."""
        if self.cpu_clock is None:
            return 0.0
        return max(0.0, time.clock_gettime(self.cpu_clock) - self.cpu_started)

    def stop_requested(self) -> bool:
        """Whether the running turn must stop now (its reason is then set)."""
        return self.reason is not None or self._deadline_passed() or self.interrupt_overdue()

    def _deadline_passed(self) -> bool:
        # While the guest waits for input its wall-clock limits stand still (host_door).
        stopped_at = self.clock_stopped_at
        now = time.monotonic() if stopped_at is None else stopped_at
        if self.deadline_at is not None and now >= self.deadline_at:
            if self.reason is None:
                self.reason = "deadline"
            return True
        if self.fuel_deadline_at is not None and now >= self.fuel_deadline_at:
            if self.reason is None:
                self.reason = "out_of_fuel"
            return True
        if self.cpu_deadline_at is not None and self.cpu_clock is not None \
                and time.clock_gettime(self.cpu_clock) >= self.cpu_deadline_at:
            if self.reason is None:
                self.reason = "cpu_time"
            return True
        return False

    def tick(self) -> None:
        """On the ticker's thread, for an engine without epochs: what the epoch callback
        does on the guest thread otherwise (hand over output, raise a soft interrupt
        whose window opened), then a stop that is due."""
        if self.streams.io_lock.acquire(blocking=False):  # else the guest thread hands output over itself
            try:
                if self.running:  # (a stop holds the lock while memory is protected)
                    output = self.streams.output
                    if output is not None:
                        self.streams.drain()
                        output.maybe_flush()
                    self.soft.poll_from_here()
            finally:
                self.streams.io_lock.release()
        if self.running and self.stop_requested():
            self._hard_stop()

    def _hard_stop(self) -> None:
        """Stop the running turn by trap (an engine without epochs), once per turn, from
        a thread of its own (the caller may be the ticker, which serves every guest)."""
        with self._stop_lock:
            if self._stopping or not self.running:
                return
            self._stopping = True
            serial = self._turn_serial
        if self.reason is None:
            self.reason = "interrupted"
        threading.Thread(target=self._stop_by_trap, args=(serial,), name="wasm-kernel-stop", daemon=True).start()

    def _stop_by_trap(self, serial: int) -> None:
        def still_running() -> bool:
            return self.running and self._turn_serial == serial

        failures = 0
        while still_running():
            try:
                if stop_thread(self._turn_tid, wasm_code_ranges(), protect_memory=self._protect,
                               unprotect_memory=self._unprotect, still_running=still_running):
                    return
                failures = 0
            except (ThreadStopError, OSError) as err:
                failures += 1
                log.error("guest.stop_failed", error=str(err), failures=failures)
                if failures >= STOP_FAILURES_FATAL:
                    # Fail closed: a guest nothing can stop must not run on unbounded.
                    log.critical("guest.unstoppable", reason="every stop by trap failed; the process ends")
                    # On stderr too: the log may go nowhere, and a silent SIGKILL reads as a crash.
                    os.write(2, f"wasm-kernel: the guest could not be stopped ({err}); the process ends\n".encode())
                    os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.01)

    def _protect(self) -> bool:
        """For a stop, with the guest thread held in wasm code by the tracer: make its
        memory inaccessible, holding every lock of the other readers until _unprotect."""
        if not self.streams.io_lock.acquire(timeout=PROTECT_WAIT_SECONDS):
            return False
        soft_lock = self.soft.lock
        if not soft_lock.acquire(timeout=PROTECT_WAIT_SECONDS):
            self.streams.io_lock.release()
            return False
        try:
            window = self.instance.mem.window(self.instance.require_store())  # the guest thread is held: no race
            protect(window.base, window.size, accessible=False)
            self._protected = (window.base, window.size)
            return True
        except BaseException:
            soft_lock.release()
            self.streams.io_lock.release()
            raise

    def _unprotect(self) -> None:
        protected, self._protected = self._protected, None
        try:
            if protected is not None:
                protect(*protected, accessible=True)
        finally:
            self.soft.lock.release()
            self.streams.io_lock.release()

    def epoch_decide(self) -> int | None:
        # Runs on the guest thread every tick while the guest computes: the moment
        # to hand over output that has waited long enough.
        output = self.streams.output
        if output is not None:
            self.streams.drain()
            output.maybe_flush()
        if self.soft.pending and self.instance.store is not None:
            self.soft_interrupt_raised(self.instance.store)
        if self.soft.work_pending and self.instance.store is not None:
            self.soft.raise_work_if_due(self.instance.store, self.instance.mem, self.instance.require_store)
        return None if self.stop_requested() else 1

    def classify(self, trapped: BaseException | None) -> TrapReason:
        """Why a turn trapped: the stop the host asked for, else what the trap says."""
        if self.reason is not None:
            return self.reason
        if isinstance(trapped, wasmtime.Trap):
            if trapped.trap_code == wasmtime.TrapCode.OUT_OF_FUEL:
                return "out_of_fuel"
            if trapped.trap_code == wasmtime.TrapCode.STACK_OVERFLOW:
                return "stack_overflow"
            if trapped.trap_code == wasmtime.TrapCode.INTERRUPT:
                return "interrupted"
        if self.instance.memory_bytes is not None and self.instance.store is not None:
            if self.instance.memory.data_len(self.instance.store) + MEMORY_HEADROOM >= self.instance.memory_bytes:
                return "memory"
        return "crash"


__all__ = ["BASELINE_FUEL_PER_SECOND", "StopNow", "TurnStops"]
