"""Keeps the host's WASI descriptor table consistent with a rolled-back guest.

Rolling a guest back restores its memory, but WASI descriptors live on the host.
Left alone, a rollback would leak every file the failed cell opened, and a file it
closed would stay "open" in the restored guest while its number is handed to the
next file opened: the stale Python object would then write into the wrong file.

So, during a turn:
- a descriptor opened in this turn and closed again is closed for real at once;
- a descriptor that was open before the turn is *not* closed on the host when the
  guest closes it: the close is deferred until the turn commits, so its number can
  never be reused inside the turn.
At commit the deferred closes happen and every open descriptor's offset is noted;
at rollback the turn's own descriptors are closed and the offsets are put back.

Undo (one level) goes back past a committed turn, to the last commit with
`undo_point=True` (the one after the previous cell). It closes the descriptors
opened since then and puts the offsets back. A descriptor that was open at the undo
point and that the guest closed since stays open on the host ("held") until the
undo record expires at the next undo point: undo hands it back to the restored
Python file object, and meanwhile its number cannot be given to another file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from .wasi_abi import EBADF, SUCCESS

STDIO = (0, 1, 2)
PATH_KEPT_MAX = 4096  # longer paths are not kept for a reopen (PATH_MAX)


@dataclass(frozen=True)
class OpenOrigin:
    """How a descriptor was opened, relative to a preopen: enough to open the same
    file again (a woken state's files, runtime/hibernation.py). path_open's
    arguments, without the flags that create or truncate."""

    dirfd: int
    dirflags: int
    path: bytes
    oflags: int
    rights: int
    inheriting: int
    fdflags: int

Close = Callable[[int], int]
Tell = Callable[[int], "int | None"]
Seek = Callable[[int, int], None]


@dataclass
class _UndoRecord:
    before: dict[int, int | None]  # the committed descriptors and offsets at the undo point
    opened: set[int] = field(default_factory=set)  # opened since, still open
    held: set[int] = field(default_factory=set)  # open at the undo point, closed by the guest since


class FdLedger:
    def __init__(self, fixed: range) -> None:
        # Preopens: open from instantiation on, offsets meaningless (never asked for).
        self.fixed = frozenset(fixed)
        self.committed: dict[int, int | None] = {fd: None for fd in fixed}
        self.opened: set[int] = set()
        self.deferred: set[int] = set()
        self._undo: _UndoRecord | None = None
        # Descriptors opened from a preopen by path, and how: a descriptor without one
        # (opened from another descriptor, or renumbered) cannot be reopened.
        self.origins: dict[int, OpenOrigin] = {}

    @property
    def only_fixed_open(self) -> bool:
        """Whether the host holds no descriptor beyond the preopens (and stdio)."""
        held = self._undo.held if self._undo is not None else set()
        return set(self.committed) == self.fixed and not (self.opened or self.deferred or held)

    def on_open(self, fd: int, origin: OpenOrigin | None = None) -> None:
        self.opened.add(fd)
        if origin is None:
            self.origins.pop(fd, None)
        else:
            self.origins[fd] = origin

    def on_close(self, fd: int, close: Close) -> int:
        if fd in STDIO:
            return SUCCESS  # stdio stays ours; a guest close must not free fd 1
        if fd in self.opened:
            self.opened.discard(fd)
            return close(fd)
        if fd in self.committed:
            if fd in self.deferred:
                return EBADF
            self.deferred.add(fd)
            return SUCCESS
        if self._undo is not None and fd in self._undo.held:
            return EBADF  # closed, as far as the guest knows; kept for undo
        return close(fd)

    def commit(self, close: Close, tell: Tell, *, undo_point: bool = False) -> None:
        """The turn is kept. undo_point: it was a cell, and undo() may later go back
        to this commit's previous state; otherwise the current undo record stays."""
        if undo_point:
            self.forget_undo(close)
            record: _UndoRecord | None = _UndoRecord(dict(self.committed))
        else:
            record = self._undo
        for fd in self.deferred:
            self.committed.pop(fd, None)
            if record is not None and fd in record.before:
                record.held.add(fd)
            else:
                if record is not None:
                    record.opened.discard(fd)
                close(fd)
        for fd in self.opened:
            self.committed[fd] = None
            if record is not None:
                record.opened.add(fd)
        self.deferred.clear()
        self.opened.clear()
        for fd in list(self.committed):
            if fd not in self.fixed:
                self.committed[fd] = tell(fd)
        self._undo = record

    def rollback(self, close: Close, seek: Seek) -> None:
        for fd in self.opened:
            close(fd)
        self.opened.clear()
        self.deferred.clear()
        for fd, offset in self.committed.items():
            if offset is not None:
                seek(fd, offset)

    @property
    def can_undo(self) -> bool:
        return self._undo is not None

    def undo(self, close: Close, seek: Seek) -> list[int]:
        """Back to the last undo point (between turns only): close what was opened
        since, take back what was closed since, restore offsets. Returns the
        descriptors it closed."""
        record = self._undo
        if record is None:
            raise RuntimeError("no descriptor state to undo to")
        closed = sorted(record.opened | self.opened)  # nothing is in flight between turns
        self.opened.clear()
        self.deferred.clear()
        for fd in closed:
            close(fd)
        self.committed = dict(record.before)
        for fd, offset in self.committed.items():
            if offset is not None:
                seek(fd, offset)
        self._undo = None
        return closed

    def forget_undo(self, close: Close) -> None:
        """Drop the undo record: the descriptors it held are closed for real."""
        record, self._undo = self._undo, None
        if record is not None:
            for fd in record.held:
                close(fd)

    def open_numbers(self) -> set[int]:
        """Between turns: the descriptors the guest holds open, beyond stdio and the preopens."""
        return {fd for fd in self.committed if fd not in self.fixed}

    def hold(self, fd: int) -> None:
        """A descriptor the host opened for the guest outside any turn (a resumed
        state's placeholder): committed, as if a turn had opened it."""
        self.committed[fd] = None

    @property
    def open_count(self) -> int:
        held = len(self._undo.held) if self._undo is not None else 0
        return len(self.committed) + len(self.opened) - len(self.deferred) + held
