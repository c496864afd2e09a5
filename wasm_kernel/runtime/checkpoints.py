"""A guest's checkpoints and what puts them back: rollback after a trap, and undo.

After every turn that ends normally, the whole wasm state (memory and the
stack-pointer global) is copied into a checkpoint off the critical path, on the
guest's own thread after the caller already has its result. When a turn traps (fuel,
deadline, interrupt, a crash), that checkpoint is copied back and the WASI
descriptors are reconciled, so the interpreter is exactly as it was after the last
good turn.

`undo()` goes one step further back: to the state before the last cell that
completed (see MemoryCheckpoint and FdLedger for the undo records). Queries never
move that point. Files are not rolled back.

PythonGuest inherits it; the state it reads is the guest's, declared below.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable

import wasmtime

from ..host.guest_memory import GuestMemory
from ..host.log import get_logger
from ..host.memory_checkpoint import NO_UNDO_YET, MemoryCheckpoint, release_pages
from ..host.wasi_shim import Original
from .engine_upgrade import UNLIMITED_FUEL
from .fd_ledger import FdLedger
from .guest_config import GuestUnavailable, TrapReason, TurnOutcome, UndoFailed
from .guest_thread import GuestThread
from .notebook_overlay import NotebookOverlay

log = get_logger("wasm_kernel.runtime")

# A rolled-back turn that grew memory by more than this is restored into a fresh
# instance, so the growth is given back (see _restore_into_fresh_instance). Any
# growth: what is left behind is dead for good (the next checkpoint keeps it), so
# a threshold only sets how fast repeated stops use up the address space. Measured
# before it was 0: 24 MiB lost per stop of a cell copying 24 MiB, a MemoryError
# after about 80 stops.
COMPACT_AFTER_GROWTH = 0


class Checkpoints:
    """The checkpoint side of a guest. The guest sets these as it starts and runs turns."""

    _thread: GuestThread
    _closed: bool
    _store: wasmtime.Store | None
    _memory: wasmtime.Memory
    _globals: list[wasmtime.Global]
    _checkpoint: MemoryCheckpoint | None
    _checkpoint_error: BaseException | None
    # The checkpoint owed after the last turn, and whether it is an undo point
    # (None: none owed). Taken by checkpoint_soon(), or before the next turn.
    _owed: bool | None
    mem: GuestMemory
    ledger: FdLedger
    overlay: NotebookOverlay | None
    originals: dict[str, Original]  # the WASI functions our shadows replace
    # Methods of the guest's other parts, declared as attributes only: a stub method
    # here would hide the real one from a base that comes later in the guest's MRO.
    _require_store: Callable[[], wasmtime.Store]
    _refuel: Callable[[wasmtime.Store, int], None]
    _instantiate: Callable[..., None]
    _restart: Callable[[], None]
    _classify: Callable[[BaseException | None], TrapReason]
    _disarm_stops: Callable[[], None]

    # --- public API (any thread) ---------------------------------------------

    def undo(self) -> bool:
        """Put the interpreter back to how it was before the last cell that completed
        (ok or raising; a cell stopped by a limit was already rolled back, so it does
        not count). One level: False if there is nothing to undo, and then
        `undo_unavailable_reason()` says why. Files are not rolled back; files the
        undone cell opened are closed. Raises UndoFailed if it broke off half way."""
        if self._closed:
            raise GuestUnavailable("this sandbox is closed; create a new one")
        return self._thread.call(self._undo)

    def undo_unavailable_reason(self) -> str | None:
        """None if undo() would undo a cell, else why it would not."""
        if self._closed:
            return "the sandbox is closed"
        return self._thread.call(self._undo_refusal)

    def wait_idle(self) -> None:
        """Wait until background work (the last checkpoint) is done."""
        self._thread.call(self._settle)

    def checkpoint_soon(self) -> None:
        """Take the last cell's checkpoint now, in the background. It is taken before
        the next turn anyway; a caller that has answered its own client first (a
        kernel sending its reply) starts it here, so the two do not contend."""
        self._thread.submit(self._settle)

    # --- guest thread ----------------------------------------------------------

    def _scratch(self) -> int:
        # Between turns the guest's shadow stack is empty: the bytes just below the
        # stack pointer are free, so host bookkeeping calls can use them.
        sp = self._globals[0].value(self._require_store()) if self._globals else 0
        return int(sp) - 64

    def _fd_close(self, fd: int) -> int:
        if self.overlay is not None:
            self.overlay.forget(fd)
        return int(self.originals["fd_close"](self._require_store(), fd))

    def _fd_tell(self, fd: int) -> int | None:
        store, scratch = self._require_store(), self._scratch()
        if self.originals["fd_tell"](store, fd, scratch) != 0:
            return None
        return int(struct.unpack("<Q", self.mem.read(store, scratch, 8))[0])

    def _fd_seek(self, fd: int, offset: int) -> None:
        self.originals["fd_seek"](self._require_store(), fd, offset, 0, self._scratch())

    def _settle(self) -> None:
        """Take the checkpoint the last turn owes, if any."""
        owed, self._owed = self._owed, None
        if owed is not None:
            self._take_checkpoint(owed)

    def _take_checkpoint(self, undo_point: bool = False) -> None:
        store = self._store
        if store is None:
            return
        try:
            self._refuel(store, UNLIMITED_FUEL)  # the bookkeeping calls below run shim code
            self.ledger.commit(self._fd_close, self._fd_tell, undo_point=undo_point)
            assert self._checkpoint is not None
            self._checkpoint.take(store, self._memory, self._globals, undo_point=undo_point)
            self._checkpoint_error = None
        except Exception as err:
            self._checkpoint_error = err
            log.warning("guest.checkpoint_failed", error=str(err))

    def _recover(self, outcome: TurnOutcome, trapped: BaseException | None) -> None:
        """A turn that trapped, or ended without a result: put the last checkpoint
        back, or if there is none (or that fails) start a fresh interpreter, files kept."""
        outcome.status = "trap"
        outcome.exit_code = None
        outcome.trap = self._classify(trapped)
        log.info("guest.trap", trap=outcome.trap, detail=first_line(trapped))
        # The stop is handled: the rollback's own shim calls must not be stopped too.
        self._disarm_stops()
        if self._checkpoint is not None and self._checkpoint.taken and self._checkpoint_error is None:
            try:
                self._rollback()
                outcome.rolled_back = True
                return
            except Exception as err:  # fall back to a fresh interpreter, files kept
                log.warning("guest.rollback_failed", error=str(err))
        self._restart()
        outcome.restarted = True

    def _rollback(self) -> None:
        store = self._require_store()
        self._refuel(store, UNLIMITED_FUEL)  # an out-of-fuel trap left none for the shim calls
        checkpoint = self._checkpoint
        assert checkpoint is not None
        if self._memory.data_len(store) - checkpoint.size > COMPACT_AFTER_GROWTH:
            self._restore_into_fresh_instance(store, checkpoint)
        else:
            checkpoint.restore(store, self._memory, self._globals)
        self.ledger.rollback(self._fd_close, self._fd_seek)

    def _undo_refusal(self) -> str | None:
        self._settle()
        checkpoint = self._checkpoint
        if self._store is None or checkpoint is None or not checkpoint.taken:
            return NO_UNDO_YET
        if self._checkpoint_error is not None:
            return f"the checkpoint after the last turn failed ({first_line(self._checkpoint_error)})"
        reason = checkpoint.undo_unavailable_reason
        if reason is None and not self.ledger.can_undo:
            reason = "the last cell's descriptor record is missing"
        return reason

    def _undo(self) -> bool:
        reason = self._undo_refusal()
        if reason is not None:
            log.info("guest.undo_refused", reason=reason)
            return False
        store = self._require_store()
        self._refuel(store, UNLIMITED_FUEL)  # the descriptor bookkeeping runs shim code
        checkpoint = self._checkpoint
        assert checkpoint is not None and checkpoint.undo_size is not None
        grown = self._memory.data_len(store) - checkpoint.undo_size
        try:
            checkpoint.revert()
            if grown > COMPACT_AFTER_GROWTH:  # as a rollback: give the undone growth back
                self._restore_into_fresh_instance(store, checkpoint)
            else:
                checkpoint.restore(store, self._memory, self._globals)
            closed = self.ledger.undo(self._fd_close, self._fd_seek)
        except Exception as err:
            log.warning("guest.undo_failed", error=str(err))
            self._restart()
            raise UndoFailed(f"undo failed ({first_line(err)}); the interpreter was restarted, files kept") from err
        log.info("guest.undone", copied_bytes=checkpoint.last_copied, closed_fds=len(closed))
        return True

    def _restore_into_fresh_instance(self, store: wasmtime.Store, checkpoint: MemoryCheckpoint) -> None:
        """Memory a failed turn grew is never reused by the restored allocator
        (wasi-libc's sbrk grows from the memory's end, past what the allocator knew):
        each such rollback would eat wasm32 address space until nothing is left. So
        after any growth the checkpoint goes into a new instance of the module in the
        same store (WASI descriptors live in the store and are kept), and the old
        memory's pages are handed back to the host."""
        old = self._memory
        old_base, old_size = ctypes.addressof(old.data_ptr(store).contents), old.data_len(store)
        self._instantiate(store, at_least=checkpoint.size)
        checkpoint.restore_fresh(store, self._memory, self._globals)
        release_pages(old_base, old_size)
        log.info("guest.compacted", released_bytes=old_size, kept_bytes=checkpoint.size)


def first_line(err: BaseException | None) -> str:
    """An error's first line, for a log entry or a message to the user."""
    if err is None:
        return "the cell ended without a result"
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


__all__ = ["Checkpoints", "first_line"]
