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

A guest holds one Checkpoints; it is given the instance, the start's files and the
stops, and the guest's restart for when nothing can be put back.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import wasmtime

from ..host.log import get_logger
from ..host.memory_checkpoint import NO_UNDO_YET, MemoryCheckpoint, release_pages
from .guest_config import TurnOutcome, UndoFailed
from .guest_instance import UNLIMITED_FUEL, GuestInstance
from .start_files import StartFiles
from .turn_stops import TurnStops

if TYPE_CHECKING:
    from .points import Points

log = get_logger("wasm_kernel.runtime")

# A rolled-back turn that grew memory by more than this is restored into a fresh
# instance, so the growth is given back (see restore_into_fresh_instance). Any
# growth: what is left behind is dead for good (the next checkpoint keeps it), so
# a threshold only sets how fast repeated stops use up the address space. Measured
# before it was 0: 24 MiB lost per stop of a cell copying 24 MiB, a MemoryError
# after about 80 stops.
COMPACT_AFTER_GROWTH = 0


class Checkpoints:
    """The checkpoint of one guest, and what puts it back. Every method runs on the
    guest's thread (the guest's own undo() and wait_idle() go there)."""

    def __init__(self, instance: GuestInstance, files: StartFiles, stops: TurnStops,
                 restart: Callable[[], None]) -> None:
        self._instance = instance
        self._files = files
        self._stops = stops
        self._restart = restart
        self.checkpoint: MemoryCheckpoint | None = None
        self.error: BaseException | None = None  # why the last one failed
        # The checkpoint owed after the last turn, and whether it is an undo point
        # (None: none owed). Taken by settle(), at the latest before the next turn.
        self.owed: bool | None = None
        # Every cell's point (points.py), told of each undo record and undo point; None
        # for a guest that keeps none (a child, an image build).
        self.points: Points | None = None

    def begin(self, no_undo_reason: str | None = None, *, moved: bool = False,
              resume_points: dict[str, Any] | None = None) -> None:
        """A new start, with no points; or (moved) the same state on another engine,
        whose points go on: the old checkpoint's undo record is kept as one first;
        or a woken state, whose points (resume_points) come back with it."""
        resumed = False
        if moved and self.checkpoint is not None:
            self.checkpoint.hand_over(no_undo_reason or "the interpreter moved")
        elif self.points is not None:
            resumed = resume_points is not None and self.points.resume(resume_points)
            if not resumed:
                self.points.new_line()
        self.close()
        self.checkpoint = MemoryCheckpoint() if no_undo_reason is None else MemoryCheckpoint(
            no_undo_reason=no_undo_reason)
        if self.points is not None:
            self.checkpoint.on_record = self.points.handed
            self.checkpoint.handed = moved or resumed

    def close(self) -> None:
        self.owed = None
        if self.checkpoint is not None:
            self.checkpoint.close()
            self.checkpoint = None

    def restart(self) -> None:
        self._restart()

    def fd_close(self, fd: int) -> int:
        if self._files.overlay is not None:
            self._files.overlay.forget(fd)
        return int(self._instance.originals["fd_close"](self._instance.require_store(), fd))

    def _fd_tell(self, fd: int) -> int | None:
        store, scratch = self._instance.require_store(), self._instance.below_stack()
        if self._instance.originals["fd_tell"](store, fd, scratch) != 0:
            return None
        return int(struct.unpack("<Q", self._instance.mem.read(store, scratch, 8))[0])

    def fd_seek(self, fd: int, offset: int) -> None:
        instance = self._instance
        instance.originals["fd_seek"](instance.require_store(), fd, offset, 0, instance.below_stack())

    def settle(self) -> None:
        """Take the checkpoint the last turn owes, if any."""
        owed, self.owed = self.owed, None
        if owed is not None:
            self.take(owed)

    def take(self, undo_point: bool = False) -> None:
        store = self._instance.store
        if store is None:
            return
        try:
            self._instance.refuel(store, UNLIMITED_FUEL)  # the bookkeeping calls below run shim code
            self._files.ledger.commit(self.fd_close, self._fd_tell, undo_point=undo_point)
            assert self.checkpoint is not None
            self.checkpoint.take(store, self._instance.memory, self._instance.globals, undo_point=undo_point)
            self.error = None
            if undo_point and self.points is not None:
                self.points.taken()
        except Exception as err:
            self.error = err
            log.warning("guest.checkpoint_failed", error=str(err))

    def recover(self, outcome: TurnOutcome, trapped: BaseException | None) -> None:
        """A turn that trapped, or ended without a result: put the last checkpoint
        back, or if there is none (or that fails) start a fresh interpreter, files kept."""
        outcome.status = "trap"
        outcome.exit_code = None
        outcome.trap = self._stops.classify(trapped)
        log.info("guest.trap", trap=outcome.trap, detail=first_line(trapped))
        # The stop is handled: the rollback's own shim calls must not be stopped too.
        self._stops.disarm()
        if self.checkpoint is not None and self.checkpoint.taken and self.error is None:
            try:
                self._rollback()
                outcome.rolled_back = True
                return
            except Exception as err:  # fall back to a fresh interpreter, files kept
                log.warning("guest.rollback_failed", error=str(err))
        self._restart()
        outcome.restarted = True

    def _rollback(self) -> None:
        store = self._instance.require_store()
        self._instance.refuel(store, UNLIMITED_FUEL)  # an out-of-fuel trap left none for the shim calls
        checkpoint = self.checkpoint
        assert checkpoint is not None
        if self._instance.memory.data_len(store) - checkpoint.size > COMPACT_AFTER_GROWTH:
            self.restore_into_fresh_instance(store, checkpoint)
        else:
            checkpoint.restore(store, self._instance.memory, self._instance.globals)
        self._files.ledger.rollback(self.fd_close, self.fd_seek)

    def undo_refusal(self) -> str | None:
        self.settle()
        checkpoint = self.checkpoint
        if self._instance.store is None or checkpoint is None or not checkpoint.taken:
            return NO_UNDO_YET
        if self.error is not None:
            return f"the checkpoint after the last turn failed ({first_line(self.error)})"
        reason = checkpoint.undo_unavailable_reason
        if reason is None and not self._files.ledger.can_undo:
            reason = "the last cell's descriptor record is missing"
        return reason

    def undo(self) -> bool:
        reason = self.undo_refusal()
        if reason is not None:
            log.info("guest.undo_refused", reason=reason)
            return False
        store = self._instance.require_store()
        self._instance.refuel(store, UNLIMITED_FUEL)  # the descriptor bookkeeping runs shim code
        checkpoint = self.checkpoint
        assert checkpoint is not None and checkpoint.undo_size is not None
        grown = self._instance.memory.data_len(store) - checkpoint.undo_size
        try:
            checkpoint.revert()
            if grown > COMPACT_AFTER_GROWTH:  # as a rollback: give the undone growth back
                self.restore_into_fresh_instance(store, checkpoint)
            else:
                checkpoint.restore(store, self._instance.memory, self._instance.globals)
            closed = self._files.ledger.undo(self.fd_close, self.fd_seek)
        except Exception as err:
            log.warning("guest.undo_failed", error=str(err))
            self._restart()
            raise UndoFailed(f"undo failed ({first_line(err)}); the interpreter was restarted, files kept") from err
        if self.points is not None:
            self.points.undone()
        log.info("guest.undone", copied_bytes=checkpoint.last_copied, closed_fds=len(closed))
        return True

    def restore_into_fresh_instance(self, store: wasmtime.Store, checkpoint: MemoryCheckpoint) -> None:
        """Memory a failed turn grew is never reused by the restored allocator
        (wasi-libc's sbrk grows from the memory's end, past what the allocator knew):
        each such rollback would eat wasm32 address space until nothing is left. So
        after any growth the checkpoint goes into a new instance of the module in the
        same store (WASI descriptors live in the store and are kept), and the old
        memory's pages are handed back to the host."""
        old = self._instance.memory
        old_base, old_size = ctypes.addressof(old.data_ptr(store).contents), old.data_len(store)
        self._instance.instantiate(store, at_least=checkpoint.size)
        checkpoint.restore_fresh(store, self._instance.memory, self._instance.globals)
        release_pages(old_base, old_size)
        log.info("guest.compacted", released_bytes=old_size, kept_bytes=checkpoint.size)


def first_line(err: BaseException | None) -> str:
    """An error's first line, for a log entry or a message to the user."""
    if err is None:
        return "the cell ended without a result"
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


__all__ = ["Checkpoints", "first_line"]
