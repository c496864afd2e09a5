"""A soft interrupt: KeyboardInterrupt raised in the cell's own code, as ipykernel's
SIGINT does, instead of stopping the guest and rolling it back.

The guest's shell keeps two 32-bit words (_wasm_kernel_guest): `window` is 1 while the
cell's code runs (not the shell's own bookkeeping), and `taken` counts the interrupts
the guest took at a safe point. An interrupt asked for during a turn with a grace is
raised once the window is open: by the interrupting thread itself, which writes
CPython's own interrupt words in guest memory (signal_words.py) when they are known,
else on the guest thread by its epoch callback, which calls PyErr_SetInterruptEx
(exported by the patched module). If the guest has not taken it within the grace (a
long call into compiled code), the turn is stopped the hard way. One soft interrupt
per turn: a cell that caught KeyboardInterrupt and runs on is stopped hard by the next,
and so is one the first has not reached yet.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import wasmtime

from ..host.guest_memory import GuestFault, GuestMemory, MemoryWindow
from .signal_words import SIGINT, SignalWords


class SoftInterrupt:
    """The state of one guest's soft interrupts; the guest thread and the interrupting
    thread share it (each field is written whole)."""

    def __init__(self) -> None:
        self.raise_fn: Any = None  # PyErr_SetInterruptEx, when the module exports it
        self.words_at: int | None = None  # where the guest's three words are
        self.grace: float | None = None  # this turn's grace; None: interrupts are hard
        self.asked_at: float | None = None  # an interrupt the guest has not taken yet
        self.raised = False  # PyErr_SetInterruptEx was called for it
        self.taken_before = 0
        self.asked = False  # this turn had its soft interrupt: the next one is hard
        self.grace_expired = False
        self.words: SignalWords | None = None  # CPython's interrupt words, when found at boot
        # This turn's memory, for a write from another thread; None between turns,
        # when the memory may be swapped (a rollback), under the lock.
        self._target: MemoryWindow | None = None
        self.lock = threading.Lock()  # a stop by trap holds it while memory is protected
        self.in_turn = False
        # Host work asked for where CPython's words are unknown: the guest thread's
        # epoch callback raises it (raise_work_if_due).
        self.work_pending = False

    def begin_turn(self, grace: float | None, window: MemoryWindow | None = None) -> None:
        with self.lock:
            self.grace, self.asked_at, self.raised, self.asked, self.grace_expired = grace, None, False, False, False
            self._target = window if self.words is not None else None
            self.in_turn, self.work_pending = True, False

    def end_turn(self) -> None:
        with self.lock:
            self._target = None
            self.in_turn = self.work_pending = False
            self.grace = self.asked_at = None
            self.raised = False

    @property
    def pending(self) -> bool:
        return self.asked_at is not None

    def ask(self) -> bool:
        """From any thread: ask for a soft interrupt. False if this one must be hard: no
        grace, no words or export, or the turn had its soft interrupt already, taken
        or still on its way (raised and not seen taken, or waiting for the cell's code
        to run). A second interrupt is the user insisting: taken for the first, it was
        lost once the guest took and swallowed that one, and the cell ran on to its
        CPU budget."""
        with self.lock:
            if self.grace is None or self.raise_fn is None or self.words_at is None or self.asked:
                return False
            self.asked = True
            self.asked_at = time.monotonic()
        # If the cell's code runs, the words are written now, from here: the guest takes
        # it at its next eval-breaker check, with no epoch tick needed; else the guest
        # thread (or the ticker's, without epochs) raises it when the window opens.
        self.poll_from_here()
        return True

    def _trip(self, taken: int) -> bool:
        """Under the lock, the window open: the interrupt is raised now, through the
        words when they are known (True); else the caller calls PyErr_SetInterruptEx."""
        self.taken_before, self.raised = taken, True
        if self.words is None or self._target is None:
            return False
        self.words.trip(self._target)
        return True

    def poll_from_here(self) -> None:
        """From a thread that is not the guest's (the interrupting one; the ticker's, on an
        engine without epochs), holding no lock of ours: what raise_if_due does on the
        guest thread, through this turn's window and the words only. Trip them once the cell's code runs, see the
        interrupt taken, and set the eval-breaker bit again while it is not (the guest
        clears it with plain read-modify-writes of its own)."""
        with self.lock:
            target, at = self._target, self.words_at
            if self.asked_at is None or target is None or at is None or self.words is None:
                return
            try:
                window, taken = struct.unpack("<II", target.read(at, 8))
            except GuestFault:
                return
            if not self.raised:
                if window == 1:
                    self._trip(taken)
            elif taken != self.taken_before:  # taken at a safe point: no stop
                self.asked_at, self.raised = None, False
            else:
                self.words.reassert(target)

    def ask_for_work(self) -> bool:
        """From any thread: have the running guest call its host work
        (_wasm_kernel_guest.host_work) at its next safe point, with the signal an
        interrupt uses and the guest's third word set first, so the handler knows it
        is not one. False if it cannot now (no turn, or CPython's words unknown)."""
        with self.lock:
            target, at = self._target, self.words_at
            if not self.in_turn or at is None:
                return False
            if target is None or self.words is None:
                if self.raise_fn is None:
                    return False
                self.work_pending = True  # the epoch callback raises it (the caller wakes the ticker)
                return True
            try:
                target.set_u32(at + 8, 1)
            except GuestFault:
                return False
            self.words.trip(target)
            return True

    def raise_work_if_due(self, store: Any, mem: GuestMemory, guest_store: Callable[[], wasmtime.Store]) -> None:
        """On the guest thread (the epoch callback): host work asked for without the
        words: mark it in the guest's third word and raise the signal by the export."""
        with self.lock:
            at = self.words_at
            if not self.work_pending or at is None:
                return
            self.work_pending = False
            try:
                mem.write(store, at + 8, struct.pack("<I", 1))
            except GuestFault:
                return
        self._raise_by_export(store, guest_store)

    def overdue(self) -> bool:
        """The grace has passed without the guest taking the interrupt (said once per
        turn in grace_expired): the turn must be stopped."""
        at, grace = self.asked_at, self.grace
        if at is None or grace is None or time.monotonic() - at < grace:
            return False
        self.grace_expired = True
        return True

    def take_for_input(self) -> bool:
        """On the guest thread, in a host call: an interrupt asked for while the guest
        waits for input: input() raises KeyboardInterrupt itself. True if there was one.
        If the interrupting thread had already tripped CPython's words (the window is
        open while a cell's input() waits), they are cleared here, while the guest
        cannot run: else a second KeyboardInterrupt would fire in IPython's
        showtraceback, which prints it as a bare stderr line instead of the error."""
        with self.lock:
            if self.asked_at is None:
                return False
            if self.raised and self.words is not None and self._target is not None:
                self.words.untrip(self._target)
            self.asked_at, self.raised = None, False
            return True

    def raise_if_due(self, store: Any, mem: GuestMemory, guest_store: Callable[[], wasmtime.Store]) -> bool:
        """On the guest thread (the epoch callback, a host call): raise an interrupt
        asked for once the cell's code runs, and see whether it was taken. True while
        one is raised and not yet taken: a wait should end for it."""
        with self.lock:
            if self.asked_at is None:
                return False
            at = self.words_at
            try:
                window, taken = struct.unpack("<II", mem.read(store, at, 8)) if at is not None else (0, 0)
            except GuestFault:
                window, taken = 0, self.taken_before
            if self.raised:
                if taken != self.taken_before:  # the guest took it at a safe point: no rollback
                    self.asked_at, self.raised = None, False
                    return False
                if self.words is not None and self._target is not None:
                    self.words.reassert(self._target)
                return True
            if window != 1:
                return False
            if self._trip(taken):
                return True
        # Called from the epoch callback, the store's deadline has passed: the call's
        # own epoch check would trap it. It gets a deadline of its own, and the guest
        # the next tick's after it.
        self._raise_by_export(store, guest_store)
        return True

    def _raise_by_export(self, store: Any, guest_store: Callable[[], wasmtime.Store]) -> None:
        """PyErr_SetInterruptEx(SIGINT), called from the epoch callback: the store's
        deadline has passed, so the call gets one of its own, the guest the next tick's."""
        own = guest_store()
        own.set_epoch_deadline(1 << 20)
        try:
            self.raise_fn(store, SIGINT)
        finally:
            own.set_epoch_deadline(1)


__all__ = ["SoftInterrupt"]
