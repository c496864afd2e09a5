"""Every cell a point to go back to: the interpreter exactly as it was after it.

After each cell the guest's checkpoint (checkpoints.py) is taken with an undo
record, the pre-images of the pages the cell overwrote. Points keeps each record as
its cell's delta in a MemoryHistory (host/memory_history.py) when the next cell's
record replaces it, and notes each point's descriptors (number, how it was opened,
offset). A rewind applies the deltas from the newest point back to the one asked
for to the checkpoint's buffer, keeps the pre-images of what that overwrote as the
delta back to where it started (so the rewind is a point too, and can itself be
rewound), copies the buffer into the guest and puts its descriptors back: those
opened since are closed, those it held and the guest closed since are opened again
at their number and offset (descriptor_places.py).

A cell stopped by a limit or an interrupt was rolled back: it never made a record,
so it is no point. A new interpreter line (a start, a restart, %reset) begins with
no points; a move to the optimized engine keeps them.

Everything here runs on the guest's thread, between turns.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..host.log import get_logger
from ..host.memory_checkpoint import HandedRecord
from ..host.memory_history import HistoryError, MemoryHistory, Point
from .checkpoints import Checkpoints, first_line
from .descriptor_places import DescriptorPlaces
from .fd_ledger import OpenOrigin
from .guest_config import UndoFailed
from .guest_instance import UNLIMITED_FUEL, GuestInstance
from .start_files import StartFiles

log = get_logger("wasm_kernel.runtime")

FIRST_LINE_MAX = 80


class RewindRefused(Exception):
    """Why a rewind did not happen (one line); nothing was changed."""


@dataclass(frozen=True)
class PointInfo:
    """One point as %timeline lists it."""

    seq: int
    count: int | None  # the execution count of the cell it follows
    at: float  # time.time() when it was made
    first_line: str
    delta_bytes: int  # what keeping the way back to it costs on disk
    stored: bool  # a cell the user ran (not a silent one, nor a part of one)
    rewind_of: int | None = None  # a rewind's point: the count it went back to


@dataclass(frozen=True)
class Rewound:
    """What a rewind did."""

    target: PointInfo
    steps: int  # deltas applied
    bytes_copied: int
    files_closed: int
    files_reopened: int
    files_lost: int  # held by a placeholder: they could not be opened again
    seconds: float


class Points:
    def __init__(self, instance: GuestInstance, files: StartFiles, checkpoints: Checkpoints,
                 places: DescriptorPlaces, history: MemoryHistory, state_key: bytes | None = None,
                 fixup: Callable[[], None] | None = None) -> None:
        """state_key: the session's saved-state key, when it keeps state: each line's
        delta key is derived from it and a nonce, so a saved state's points verify
        again after a resume. fixup: runs the guest's `resume` (this host's ring,
        environment and magics), needed after a rewind once the line was resumed."""
        self._instance = instance
        self._files = files
        self._checkpoints = checkpoints
        self._places = places
        self.history = history
        self._state_key = state_key
        self._fixup = fixup
        self._nonce = b""
        self.resumed = False  # the line crossed a resume: a rewind runs the fix-up after it
        self._next_label: dict[str, Any] | None = None

    # --- kept as cells run --------------------------------------------------------

    def label_next(self, code: str, count: int | None, stored: bool, part: bool) -> None:
        """What the next cell's point says about it (set just before its turn)."""
        line = next((ln.strip() for ln in code.splitlines() if ln.strip()), "")
        if len(line) > FIRST_LINE_MAX:
            line = line[:FIRST_LINE_MAX - 1] + "…"
        self._next_label = {"count": count, "stored": stored, "part": part, "first_line": line, "at": time.time()}

    def handed(self, record: HandedRecord) -> None:
        """The checkpoint's undo record, as a new one replaces it (its on_record)."""
        history = self.history
        if record.ranges is None:
            history.break_before(len(history.points) - 1, record.reason or "a point was not kept")
        else:
            history.archive(record.ranges, memoryview(record.data), record.size, record.globals)

    def taken(self) -> None:
        """A cell's checkpoint was taken: its state is the newest point."""
        label, self._next_label = self._next_label or {"at": time.time(), "stored": False}, None
        points = self.history.points
        if label.get("part") and points and points[-1].label.get("count") == label.get("count"):
            points[-1].label["stored"] = False  # the cell's earlier part: a link, not a point to show
        checkpoint = self._checkpoints.checkpoint
        assert checkpoint is not None
        self.history.add(label, checkpoint.size, list(checkpoint.globals), {"fds": self._kept_descriptors()})

    def undone(self) -> None:
        self.history.pop_newest()

    def new_line(self) -> None:
        self.history.clear()
        self._next_label = None
        self.resumed = False
        self._set_key(os.urandom(16))

    def _set_key(self, nonce: bytes) -> None:
        self._nonce = nonce
        if self._state_key is not None:
            self.history.set_key(hmac.new(self._state_key, b"wasm-kernel points\0" + nonce, hashlib.sha256).digest())

    # --- kept with a saved state ----------------------------------------------------

    def persist(self) -> dict[str, Any] | None:
        """What a saved state's manifest keeps of the points (None: this line's key is
        not derived from the state's, so they could not be verified after a resume).
        The live record is written now too, and again when it is replaced."""
        if self._state_key is None or not self.history.points:
            return None
        checkpoint = self._checkpoints.checkpoint
        record = checkpoint.peek_record() if checkpoint is not None else None
        if record is not None and record.ranges is not None:
            self.history.archive(record.ranges, memoryview(record.data), record.size, record.globals, provisional=True)
        return {"nonce": self._nonce.hex(), "history": self.history.export()}

    def resume(self, saved: dict[str, Any]) -> bool:
        """A woken state's points, taken back; False (a new line) if they do not read."""
        try:
            self._set_key(bytes.fromhex(str(saved["nonce"])))
            self.history.restore(dict(saved["history"]))
        except (KeyError, TypeError, ValueError, HistoryError) as err:
            log.info("guest.points_not_resumed", error=str(err))
            self.new_line()
            return False
        self.resumed = True
        return True

    def timeline(self) -> list[PointInfo]:
        """From any thread: the list is copied whole, never seen half changed."""
        return [_info(p) for p in list(self.history.points)]

    # --- rewind ---------------------------------------------------------------------

    def rewind(self, seq: int, code: str, count: int | None, reopen: bool = False) -> Rewound:
        """Back to point `seq`; the rewind (the cell `code`, number `count`) becomes the
        newest point. reopen: the workspace's files were put back too, so every file
        the guest holds is opened again (the one at its path now). RewindRefused if
        it cannot be done, with nothing changed; UndoFailed if it broke off half way
        (the interpreter was restarted)."""
        started = time.perf_counter()
        checkpoints, history = self._checkpoints, self.history
        checkpoints.settle()
        checkpoint, store = checkpoints.checkpoint, self._instance.store
        if checkpoint is None or store is None or not checkpoint.taken or checkpoints.error is not None:
            raise RewindRefused("the interpreter has no checkpoint to go back from")
        target = history.find(seq)
        if target is None:
            raise RewindRefused("that point is no longer kept")
        newest = history.points[-1]
        checkpoint.hand_over()  # the live record becomes the newest delta on disk
        try:
            deltas = [history.read(point) for point in history.path_to(seq)]
        except HistoryError as err:
            raise RewindRefused(f"a point on the way back could not be read ({err})") from None
        back = checkpoint.rewind_through(deltas)
        if not self.resumed:
            try:
                history.write_for(newest, back.ranges or [], memoryview(back.data), back.size, back.globals)
            except HistoryError as err:
                checkpoint.rewind_through([back])  # the buffer as it was: nothing happened
                raise RewindRefused(f"the way back could not be kept ({err})") from None
        try:
            copied = self._restore(store)
            closed, reopened, lost = self._put_descriptors_back(store, target.extra.get("fds", {}), reopen)
            if self.resumed and self._fixup is not None:
                # A point from before a resume holds the old host's ring and magics: the
                # guest takes this host's again, and the way back covers what that wrote.
                self._fixup()
                back = checkpoint.absorb(store, self._instance.memory, self._instance.globals, back)
        except Exception as err:
            log.warning("guest.rewind_failed", error=str(err))
            checkpoints.restart()
            raise UndoFailed(f"the rewind broke off ({first_line(err)}); the interpreter was restarted, "
                             "files kept") from err
        if self.resumed:
            try:
                history.write_for(newest, back.ranges or [], memoryview(back.data), back.size, back.globals)
            except HistoryError as err:  # done, but not undoable: the points before it go
                history.break_before(len(history.points), f"a rewind's way back could not be kept ({err})")
        self.label_next(code, count, stored=True, part=False)
        assert self._next_label is not None
        self._next_label["rewind_of"] = target.label.get("count")
        self.taken()
        done = Rewound(_info(target), len(deltas), copied, closed, reopened, lost, time.perf_counter() - started)
        log.info("guest.rewound", steps=done.steps, copied_bytes=copied, seconds=round(done.seconds, 3))
        return done

    def _restore(self, store: Any) -> int:
        """The checkpoint's buffer into the guest: in place when the sizes match, else
        into a fresh instance (memory cannot shrink in place, and an allocator put
        back into more memory than it knew would never reuse the rest)."""
        checkpoint = self._checkpoints.checkpoint
        assert checkpoint is not None
        instance = self._instance
        instance.refuel(store, UNLIMITED_FUEL)  # the descriptor bookkeeping runs shim code
        if instance.memory.data_len(store) == checkpoint.size:
            checkpoint.restore(store, instance.memory, instance.globals)
        else:
            self._checkpoints.restore_into_fresh_instance(store, checkpoint)
        return checkpoint.last_copied

    def _descriptors(self) -> dict[int, list[Any]]:
        """The guest's descriptors now: number -> [how it was opened, offset]."""
        ledger = self._files.ledger
        return {fd: [ledger.origins.get(fd), offset] for fd, offset in ledger.committed.items() if fd not in ledger.fixed}

    def _kept_descriptors(self) -> dict[str, list[Any]]:
        """_descriptors() as a point keeps them: JSON, for a saved state's manifest."""
        return {str(fd): [None if o is None else [o.dirfd, o.dirflags, o.path.hex(), o.oflags, o.rights, o.inheriting,
                                                  o.fdflags], offset]
                for fd, (o, offset) in self._descriptors().items()}

    def _put_descriptors_back(self, store: Any, kept: dict[str, list[Any]], reopen: bool) -> tuple[int, int, int]:
        """The descriptor table as the point had it: (closed, reopened, lost)."""
        wanted = {int(fd): [_origin(how), offset] for fd, (how, offset) in kept.items()}
        ledger = self._files.ledger
        ledger.forget_undo(self._checkpoints.fd_close)
        now = self._descriptors()
        closed = reopened = lost = 0
        for fd in now:
            if fd not in wanted:  # opened since the point
                self._checkpoints.fd_close(fd)
                ledger.committed.pop(fd, None)
                ledger.origins.pop(fd, None)
                closed += 1
        for fd, (origin, offset) in wanted.items():
            same = fd in now and now[fd][0] == origin and not (reopen and origin is not None)
            if same:  # the same file, kept open: only its offset moves
                if offset is not None:
                    self._checkpoints.fd_seek(fd, int(offset))
            elif isinstance(origin, OpenOrigin) and self._places.reopen(store, fd, origin, offset):
                ledger.origins[fd] = origin  # over what is there now, or at the free number
                reopened += 1
            else:
                self._places.placeholder(store, fd)
                ledger.origins.pop(fd, None)
                lost += 1
            ledger.committed[fd] = offset
        return closed, reopened, lost


def _origin(how: Any) -> OpenOrigin | None:
    if not isinstance(how, list) or len(how) != 7:
        return None
    dirfd, dirflags, path, oflags, rights, inheriting, fdflags = how
    return OpenOrigin(int(dirfd), int(dirflags), bytes.fromhex(str(path)), int(oflags), int(rights), int(inheriting),
                      int(fdflags))


def _info(point: Point) -> PointInfo:
    label = point.label
    count = label.get("count")
    rewind_of = label.get("rewind_of")
    return PointInfo(point.seq, count if isinstance(count, int) else None, float(label.get("at", 0.0)),
                     str(label.get("first_line", "")), point.delta_bytes, bool(label.get("stored")),
                     rewind_of if isinstance(rewind_of, int) else None)


__all__ = ["PointInfo", "Points", "RewindRefused", "Rewound"]
